import MarkdownIt from 'markdown-it';

/**
 * Model Markdown as Matrix's `org.matrix.custom.html`: markdown-it with raw HTML off (a `<`
 * in model output is escaped, so it cannot form markup) and no autolinking guesses. The
 * plain `body` keeps the Markdown, which reads well as text.
 */
const md = new MarkdownIt({ html: false, linkify: false, breaks: true });

/**
 * `@room` in a body pings everyone in the room on clients that still read the legacy
 * push rule; a word joiner after the `@` keeps the text readable and pings no one.
 * (Every message also carries an empty `m.mentions`, which turns that rule off on newer ones.)
 */
export function neutraliseRoomMention(text: string): string {
  return text.replace(/@room\b/gi, (m) => `@\u2060${m.slice(1)}`);
}

export function markdownToMatrixHtml(text: string): string {
  return md.render(neutraliseRoomMention(text)).trimEnd();
}
