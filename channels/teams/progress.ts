import type { ToolProgress } from '../../src/contracts/channel.js';

/**
 * Teams' bound on an informative update ("Stream bot messages": "must not be more than 1 kb or
 * 1000 characters"). Both are kept: 1000 characters of most scripts are more than 1 KB.
 */
export const INFORMATIVE_MAX_CHARS = 1000;
export const INFORMATIVE_MAX_BYTES = 1024;

const ELLIPSIS = '…';
const ELLIPSIS_BYTES = 3;

/** UTF-8 bytes of one code point (a lone surrogate is sent as U+FFFD: three). */
const utf8Bytes = (cp: number): number => (cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4);

/** `text` within both bounds, cut with an ellipsis at a code point (never inside a surrogate pair). */
export function cutInformative(text: string): string {
  if (text.length <= INFORMATIVE_MAX_CHARS && Buffer.byteLength(text) <= INFORMATIVE_MAX_BYTES) return text;
  let chars = 0;
  let bytes = 0;
  // Walks only as far as the cut: a note may be long.
  for (const ch of text) {
    const b = utf8Bytes(ch.codePointAt(0)!);
    if (chars + ch.length > INFORMATIVE_MAX_CHARS - ELLIPSIS.length || bytes + b > INFORMATIVE_MAX_BYTES - ELLIPSIS_BYTES) break;
    chars += ch.length;
    bytes += b;
  }
  return `${text.slice(0, chars)}${ELLIPSIS}`;
}

/**
 * What a Teams stream's informative update says of the reply's tool calls (the `progress` the
 * reply passes, NativeStream.showsToolProgress): the call running that changed last, with its
 * latest note, as the reply's own progress line words it; with none running, the call that
 * ended last, so a tool that started and ended between two steps still shows.
 */
export class InformativeProgress {
  /** Calls running, by id, the one that changed last at the end. */
  readonly #running = new Map<string, ToolProgress>();
  #ended: ToolProgress | undefined;

  take(progress: readonly ToolProgress[] | undefined): void {
    for (const p of progress ?? []) {
      this.#running.delete(p.id);
      if (p.state === 'running') this.#running.set(p.id, p);
      else this.#ended = p;
    }
  }

  /** The line to show, or undefined before any tool call. */
  line(): string | undefined {
    let call: ToolProgress | undefined;
    for (const c of this.#running.values()) call = c;
    call ??= this.#ended;
    if (!call) return undefined;
    if (call.state === 'running') return `⏳ ${call.name}…${call.note ? ` ${call.note}` : ''}`;
    return call.state === 'done' ? `✅ ${call.name}` : `⚠️ ${call.name} failed`;
  }
}
