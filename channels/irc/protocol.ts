/**
 * The IRC wire format (RFC 1459/2812 with IRCv3 message tags): one line per message, at most
 * 512 bytes with its CRLF (tags aside). Parsing never throws: a line that cannot be read is
 * `undefined`, and the caller skips it.
 */
export interface IrcLine {
  prefix: string | undefined;
  command: string;
  params: string[];
}

/** The longest line we accept from a server, tags included (IRCv3 allows 8191 bytes of tags plus 512). */
export const MAX_INCOMING_LINE_BYTES = 8191 + 512;

export function parseLine(raw: string): IrcLine | undefined {
  let rest = raw;
  if (rest.startsWith('@')) {
    const sp = rest.indexOf(' ');
    if (sp < 0) return undefined;
    rest = rest.slice(sp + 1).trimStart();
  }
  let prefix: string | undefined;
  if (rest.startsWith(':')) {
    const sp = rest.indexOf(' ');
    if (sp < 0) return undefined;
    prefix = rest.slice(1, sp);
    rest = rest.slice(sp + 1).trimStart();
  }
  const params: string[] = [];
  let command = '';
  while (rest.length) {
    if (command && rest.startsWith(':')) {
      params.push(rest.slice(1));
      break;
    }
    const sp = rest.indexOf(' ');
    const word = sp < 0 ? rest : rest.slice(0, sp);
    if (!command) command = word.toUpperCase();
    else params.push(word);
    rest = sp < 0 ? '' : rest.slice(sp + 1).trimStart();
  }
  return command ? { prefix, command, params } : undefined;
}

/** One line to send: the last parameter is written as a trailing one. CR, LF and NUL cannot be in any. */
export function formatLine(command: string, ...params: string[]): string {
  for (const p of params) if (/[\r\n\0]/.test(p)) throw new Error(`IRC ${command}: a parameter holds CR, LF or NUL`);
  const last = params.at(-1);
  const middle = params.slice(0, -1);
  return [command, ...middle, ...(last === undefined ? [] : [`:${last}`])].join(' ');
}

export interface Source {
  nick: string;
  user: string;
  host: string;
}

/** `nick!user@host` (a server's prefix has neither `!` nor `@`). */
export function parseSource(prefix: string | undefined): Source | undefined {
  const m = prefix ? /^([^!@\s]+)!([^@\s]+)@(\S+)$/.exec(prefix) : null;
  return m ? { nick: m[1]!, user: m[2]!, host: m[3]! } : undefined;
}

/** RFC 1459 case mapping: `[]\~` are the upper case of `{}|^`. */
export function ircLower(s: string): string {
  return s.toLowerCase().replace(/[[\]\\~]/g, (c) => ({ '[': '{', ']': '}', '\\': '|', '~': '^' })[c]!);
}

/** Whether `full` (`nick!user@host`) matches `mask`, where `*` is any run and `?` any one character. */
export function maskMatches(mask: string, full: string): boolean {
  const pattern = ircLower(mask)
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${pattern}$`).test(ircLower(full));
}
