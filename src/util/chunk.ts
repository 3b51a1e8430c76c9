/**
 * Splits text for platforms with a message length limit. Cuts at the best boundary
 * (paragraph, line, sentence, word; a hard cut only inside one overlong word) and never
 * leaves a code fence open: a fence open at the cut is closed at the end of the head and
 * reopened, with its language tag, at the start of the rest.
 */

const fenceLine = /^ {0,3}(`{3,}|~{3,})(.*)$/;

/** The opening line of the fence still open at the end of `text`, if any. */
export function openFenceAt(text: string): string | undefined {
  let open: { marker: string; line: string } | undefined;
  for (const line of text.split('\n')) {
    const m = fenceLine.exec(line);
    if (!m) continue;
    const marker = m[1]!;
    if (!open) open = { marker, line: line.trim() };
    else if (marker[0] === open.marker[0] && marker.length >= open.marker.length && m[2]!.trim() === '') open = undefined;
  }
  return open?.line;
}

/**
 * Rewrites the Markdown outside code: `fn` gets each line outside fenced blocks, cut into
 * pieces around inline code spans (it gets the pieces between them, with whether the piece
 * starts the line); fences and code are kept as written.
 */
export function mapProse(md: string, fn: (prose: string, lineStart: boolean) => string): string {
  const out: string[] = [];
  let open: string | undefined;
  for (const line of md.split('\n')) {
    const m = fenceLine.exec(line);
    if (open !== undefined) {
      if (m && m[1]![0] === open[0] && m[1]!.length >= open.length && m[2]!.trim() === '') open = undefined;
      out.push(line);
    } else if (m) {
      open = m[1]!;
      out.push(line);
    } else
      out.push(
        line
          .split(/(`[^`\n]+`)/g)
          .map((part, i) => (i % 2 === 1 ? part : fn(part, i === 0)))
          .join(''),
      );
  }
  return out.join('\n');
}

function closingFor(opener: string): string {
  return /^[`~]+/.exec(opener)![0];
}

/** Where to cut `text` (an index ≤ `limit`), preferring paragraph > line > sentence > word. */
function bestCut(text: string, limit: number): number {
  const window = text.slice(0, limit);
  const floor = Math.floor(limit * 0.3);
  const candidates: RegExp[] = [/\n\s*\n/g, /\n/g, /[.!?。！？][)"'»”’]*\s+/g, /\s+/g];
  for (const re of candidates) {
    let last = -1;
    for (const m of window.matchAll(re)) last = m.index + m[0].length;
    if (last > floor) return last;
  }
  return limit;
}

export interface Split {
  head: string;
  rest: string;
  /** What was appended to `head` and prepended to `rest` to close and reopen a fence ('' when none). */
  tail: string;
  lead: string;
}

/** Cuts `text` once so that `head` fits in `max` characters. */
export function splitOnce(text: string, max: number): Split {
  if (text.length <= max) return { head: text, rest: '', tail: '', lead: '' };
  // Leave room for "\n" + a closing fence in case the cut lands inside one.
  const opener = openFenceAt(text.slice(0, max));
  const reserve = opener !== undefined || text.slice(0, max).includes('```') || text.slice(0, max).includes('~~~') ? 1 + 16 : 0;
  let cut = bestCut(text, Math.max(1, max - reserve));
  const fence = openFenceAt(text.slice(0, cut));
  if (fence === undefined) return { head: text.slice(0, cut), rest: text.slice(cut), tail: '', lead: '' };
  const closing = closingFor(fence);
  const tailFor = (c: number) => (text[c - 1] === '\n' ? '' : '\n') + closing;
  if (cut + tailFor(cut).length > max) cut = Math.max(1, max - tailFor(cut).length);
  const tail = tailFor(cut);
  const lead = `${fence}\n`;
  return { head: text.slice(0, cut) + tail, rest: lead + text.slice(cut), tail, lead };
}

/** Splits all of `text` into chunks of at most `max` characters. */
export function chunkText(text: string, max: number): string[] {
  const chunks: string[] = [];
  let rest = text;
  while (rest.length > max) {
    const s = splitOnce(rest, max);
    // A limit smaller than a fence line could never shrink the rest: cut hard instead.
    if (s.rest.length >= rest.length) {
      chunks.push(rest.slice(0, max));
      rest = rest.slice(max);
      continue;
    }
    chunks.push(s.head);
    rest = s.rest;
  }
  if (rest.length > 0 || chunks.length === 0) chunks.push(rest);
  return chunks;
}
