/**
 * Slack reads `<…>` as a control sequence: user and channel mentions (`<@U123>`, `<#C123>`),
 * broadcasts (`<!channel>`, `<!here>`, `<!everyone>`, `<!subteam^…>`) and links. Model
 * output must never ping anyone, so every text channeld sends to Slack goes through this
 * (or through `markdownToMrkdwn`, which escapes `&`, `<` and `>` itself).
 *
 * Every `<` becomes `&lt;`, which Slack shows as `<`: no sequence can form. The escape is
 * per character, so the escaped form of a growing text keeps growing; a native stream,
 * which sends only the new part, can escape the whole text and send the difference.
 */
export function neutralizeSlackMentions(text: string): string {
  return text.replace(/</g, '&lt;');
}

/** The bare broadcast words, as `markdownForSlack` defuses them on the other markdown_text paths. */
const BROADCAST = /@(here|channel|everyone)\b/gi;
const BROADCAST_WORDS = ['here', 'channel', 'everyone'];

/**
 * A native stream's text as Slack may be given it now: `<` escaped, and `@here`, `@channel`,
 * `@everyone` defused with a word joiner after the "@" (the stream's markdown_text is the
 * same standard Markdown as chat.postMessage's, so it gets the same defence). Whether `@here`
 * is a broadcast depends on what follows it (`@heres` is not), so until the text is `final`
 * a trailing "@" and the start of one of those words are held back: what is returned only
 * ever grows as the text does, and a stream can send the difference.
 */
export function slackStreamText(text: string, final: boolean): string {
  let decided = text;
  if (!final) {
    const at = text.lastIndexOf('@');
    const tail = at < 0 ? undefined : text.slice(at + 1).toLowerCase();
    if (tail !== undefined && BROADCAST_WORDS.some((w) => w.startsWith(tail))) decided = text.slice(0, at);
  }
  return neutralizeSlackMentions(decided).replace(BROADCAST, '@\u2060$1');
}
