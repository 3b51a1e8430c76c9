import type { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ReadBuffer, deserializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** Bytes one message from a stdio server may have; a longer one ends the connection. */
export const MAX_STDIO_MESSAGE_BYTES = 4 * 1024 * 1024;
/** Progress notifications parsed per connection: at most one this often, the latest kept. */
export const PROGRESS_PARSE_INTERVAL_MS = 50;

/** A progress notification's line, told apart without parsing (a response has `result` or `error`). */
export function isProgressLine(line: string): boolean {
  return line.includes('"method":"notifications/progress"') && !line.includes('"result":') && !line.includes('"error":');
}

/**
 * The SDK's line buffer, except that progress notifications are thinned out before they are
 * parsed: the SDK validates every message it reads, and a server sending 20,000 of them a
 * second made the daemon's memory grow by 130 MB. One passes every `intervalMs`; of those in
 * between only the latest is kept, and it goes out before the next other message (so the
 * last progress still precedes the call's result).
 */
export class ThrottledReadBuffer extends ReadBuffer {
  readonly #intervalMs: number;
  #lastProgressAt = Number.NEGATIVE_INFINITY;
  #pending: string | undefined;
  #held: JSONRPCMessage | undefined;

  constructor(o: { maxBufferSize: number; intervalMs?: number }) {
    super({ maxBufferSize: o.maxBufferSize });
    this.#intervalMs = o.intervalMs ?? PROGRESS_PARSE_INTERVAL_MS;
  }

  override readMessage(): JSONRPCMessage | null {
    if (this.#held) {
      const held = this.#held;
      this.#held = undefined;
      return held;
    }
    for (;;) {
      const line = this.#readLine();
      if (line === null) return null;
      if (isProgressLine(line)) {
        const now = Date.now();
        if (now - this.#lastProgressAt < this.#intervalMs) {
          this.#pending = line;
          continue;
        }
        this.#lastProgressAt = now;
        this.#pending = undefined;
        return deserializeMessage(line);
      }
      const message = deserializeMessage(line);
      if (this.#pending === undefined) return message;
      const pending = this.#pending;
      this.#pending = undefined;
      this.#held = message;
      return deserializeMessage(pending);
    }
  }

  override clear(): void {
    super.clear();
    this.#pending = undefined;
    this.#held = undefined;
  }

  /** The next whole line, or null; the base class keeps the bytes. */
  #readLine(): string | null {
    const self = this as unknown as { _buffer?: Buffer };
    const buffer = self._buffer;
    if (!buffer) return null;
    const index = buffer.indexOf('\n');
    if (index === -1) return null;
    const line = buffer.toString('utf8', 0, index).replace(/\r$/, '');
    self._buffer = buffer.subarray(index + 1);
    return line;
  }
}

/**
 * Puts a ThrottledReadBuffer into an SDK stdio transport (which has no option for it). Throws
 * when the SDK no longer has the field, so an SDK upgrade that moves it fails loudly in tests.
 */
export function throttleStdio(transport: StdioClientTransport): void {
  const t = transport as unknown as { _readBuffer?: unknown };
  if (!(t._readBuffer instanceof ReadBuffer)) throw new Error('the MCP SDK stdio transport has no _readBuffer: update src/mcp/stdio-buffer.ts');
  t._readBuffer = new ThrottledReadBuffer({ maxBufferSize: MAX_STDIO_MESSAGE_BYTES });
}
