/**
 * Model output is Markdown; IRC shows plain text, one line per message. Prose loses its
 * markup (bold, italics, headings, link syntax), code blocks keep their lines verbatim
 * (the fences go), blank lines go (IRC cannot send an empty line), and every line is wrapped
 * at word boundaries to fit `maxBytes` of UTF-8.
 */

/** Bold, italics and strikethrough markers taken off; words_with_underscores stay. */
function unemphasise(s: string): string {
  s = s.replace(/\*\*([^*\n]+)\*\*/g, '$1').replace(/__([^_\n]+)__/g, '$1');
  s = s.replace(/(^|[^*\w])\*([^*\s][^*\n]*)\*(?!\w)/g, '$1$2').replace(/(^|[^_\w])_([^_\s][^_\n]*)_(?!\w)/g, '$1$2');
  return s.replace(/~~([^~\n]+)~~/g, '$1');
}

/** One prose line as plain text: inline code verbatim, links as "text (url)". */
function plainProse(line: string): string {
  const held: string[] = [];
  const hold = (text: string) => `\u0000${held.push(text) - 1}\u0000`;
  let s = line.replace(/`([^`\n]+)`/g, (_m, c: string) => hold(c));
  s = s.replace(/!?\[([^\]\n]*)\]\(([^)\s]+)\)/g, (_m, t: string, u: string) => hold(t && t !== u ? `${unemphasise(t)} (${u})` : u));
  s = s.replace(/^ {0,3}#{1,6}\s+/, '').replace(/^(\s*)[*+]\s+/, '$1- ');
  if (/^ {0,3}([-*_])( *\1){2,} *$/.test(s)) return '';
  s = unemphasise(s);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: \u0000 delimits held pieces; no chat text contains it
  return s.replace(/\u0000(\d+)\u0000/g, (_m, i: string) => held[Number(i)]!);
}

/** A line to send: prose is wrapped at word boundaries, code is cut at the byte limit and otherwise kept. */
export interface PlainLine {
  text: string;
  code: boolean;
}

/** Markdown as plain lines (not yet wrapped); an unclosed fence runs to the end. */
export function markdownToPlainLines(md: string): PlainLine[] {
  const out: PlainLine[] = [];
  let fence: string | undefined;
  for (const raw of md.replace(/\r\n?/g, '\n').split('\n')) {
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters other than tab cannot go in an IRC line
    const line = raw.replace(/[\u0000-\u0008\u000a-\u001f\u007f]/g, '');
    const marker = /^ {0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (fence === undefined && marker) fence = marker;
    else if (fence !== undefined && marker && marker[0] === fence[0] && marker.length >= fence.length && /^ {0,3}[`~]+\s*$/.test(line)) fence = undefined;
    else out.push(fence !== undefined ? { text: line, code: true } : { text: plainProse(line), code: false });
  }
  return out.filter((l) => l.text.trim() !== '');
}

const bytes = (s: string) => Buffer.byteLength(s, 'utf8');

/** The longest prefix of `s` within `max` bytes, never cutting a character in two. */
function cutAt(s: string, max: number): [string, string] {
  let n = 0;
  let i = 0;
  for (const ch of s) {
    const b = bytes(ch);
    if (n + b > max) break;
    n += b;
    i += ch.length;
  }
  return [s.slice(0, Math.max(i, 1)), s.slice(Math.max(i, 1))];
}

/** One line wrapped at spaces into pieces of at most `maxBytes`; a word longer than that is cut. */
export function wrapLine(line: string, maxBytes: number): string[] {
  if (bytes(line) <= maxBytes) return [line];
  const out: string[] = [];
  let current = '';
  for (const word of line.split(/ +/)) {
    const next = current ? `${current} ${word}` : word;
    if (bytes(next) <= maxBytes) {
      current = next;
      continue;
    }
    if (current) out.push(current);
    const pieces = cutLine(word, maxBytes);
    current = pieces.pop() ?? '';
    out.push(...pieces);
  }
  if (current) out.push(current);
  return out;
}

/** A code line in pieces of at most `maxBytes`, cut anywhere but inside a character: joined they are the line. */
export function cutLine(line: string, maxBytes: number): string[] {
  const out: string[] = [];
  let rest = line;
  while (bytes(rest) > maxBytes) {
    const [head, tail] = cutAt(rest, maxBytes);
    out.push(head);
    rest = tail;
  }
  return rest ? [...out, rest] : out;
}

/** A Markdown reply as the IRC lines that carry it, each at most `maxBytes`. */
export function ircLines(md: string, maxBytes: number): string[] {
  return markdownToPlainLines(md).flatMap((l) => (l.code ? cutLine(l.text, maxBytes) : wrapLine(l.text, maxBytes)));
}
