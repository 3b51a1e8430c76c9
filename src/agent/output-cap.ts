import { ProviderError } from '../contracts/errors.js';

/**
 * At most this many characters per token, generously: a token is 3-4 characters of prose,
 * rarely more than 10 even of long words or runs of spaces. A model that writes more than
 * `max_output_tokens` × 16 characters in one call ignores max_tokens, and is stopped here.
 */
export const CHARS_PER_TOKEN = 16;

/** The least one server-sent event may hold, whatever max_output_tokens says: 1 MiB. */
export const MIN_EVENT_BYTES = 1024 * 1024;

/** Characters (text, reasoning and tool input together) one model call may write. */
export function outputCapChars(maxOutputTokens: number): number {
  return maxOutputTokens * CHARS_PER_TOKEN;
}

/**
 * The most bytes one server-sent event may hold before its blank line: a chunk carrying the
 * whole capped answer at once, JSON-escaped (up to 6 bytes a character, plus the frame), fits.
 */
export function eventCapBytes(capChars: number): number {
  return Math.max(MIN_EVENT_BYTES, 8 * capChars);
}

/**
 * The output budget of one model call (one step of a turn): what the model writes is counted
 * as it streams, since a server that ignores max_tokens (a local server, a broken proxy)
 * would otherwise stream forever, growing the turn in memory, in the session and in the chat.
 */
export class OutputCap {
  #left: number;
  #over = false;

  constructor(readonly capChars: number) {
    this.#left = capChars;
  }

  /** Whether the call wrote past its cap: it must stop now, with `error()`. */
  get over(): boolean {
    return this.#over;
  }

  /** A new model call (the next step of the turn) gets a budget of its own. */
  reset(): void {
    this.#left = this.capChars;
    this.#over = false;
  }

  /** The part of `text` within the budget: all of it, or its start once the cap is reached. */
  take(text: string): string {
    if (text.length <= this.#left) {
      this.#left -= text.length;
      return text;
    }
    this.#over = true;
    let end = this.#left;
    // Never half a surrogate pair.
    if (end > 0 && /[\uD800-\uDBFF]/.test(text.charAt(end - 1))) end--;
    this.#left = 0;
    return text.slice(0, end);
  }

  error(): ProviderError {
    return new ProviderError('ANSWER_TOO_LONG', `the model wrote more than ${this.capChars} characters in one call`);
  }
}

const LF = 10;
const CR = 13;

/**
 * A fetch whose response bodies fail once one server-sent event (the bytes up to a blank
 * line) passes `maxEventBytes`: the SDK's event parser buffers an event until it ends, so a
 * server sending one event that never ends would fill memory until the idle timeout.
 */
export function boundedEventFetch(maxEventBytes: number, inner?: typeof fetch): typeof fetch {
  return async (input, init) => {
    const res = await (inner ?? globalThis.fetch)(input, init);
    // Only a body a Response may be built around again (not 204, 205 or 304).
    if (!res.body || res.status < 200 || res.status === 204 || res.status === 205 || res.status === 304) return res;
    return new Response(res.body.pipeThrough(eventBound(maxEventBytes)), { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

/** Passes bytes through, failing once one event passes `maxEventBytes`. */
function eventBound(maxEventBytes: number): TransformStream<Uint8Array, Uint8Array> {
  const bytes = new EventBytes();
  return new TransformStream({
    transform(chunk, controller) {
      if (bytes.overAt(chunk, maxEventBytes) >= 0) {
        controller.error(new ProviderError('ANSWER_TOO_LONG', `one server-sent event passed ${maxEventBytes} bytes`));
        return;
      }
      controller.enqueue(chunk);
    },
  });
}

/** Counts the bytes of the server-sent event being read: those since the last blank line (CR, LF or CRLF line ends). */
export class EventBytes {
  #event = 0;
  #line = 0;
  #afterCR = false;

  /** Reads `chunk` on: the index of its byte that takes the event past `maxBytes`, or -1. */
  overAt(chunk: Uint8Array, maxBytes: number): number {
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i]!;
      if (b === LF && this.#afterCR) {
        this.#afterCR = false; // the LF of a CRLF
        continue;
      }
      this.#afterCR = b === CR;
      if (b === LF || b === CR) {
        if (this.#line === 0) this.#event = 0; // a blank line ends the event
        this.#line = 0;
      } else {
        this.#line++;
        if (++this.#event > maxBytes) return i;
      }
    }
    return -1;
  }
}
