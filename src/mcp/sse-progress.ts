import { isProgressLine, PROGRESS_PARSE_INTERVAL_MS } from './stdio-buffer.js';

const LF = 0x0a;
const CR = 0x0d;

/** A progress notification's event: its bytes, and the id the SDK is to see with it. */
interface Progress {
  bytes: Uint8Array;
  /** Its own `id:` or, when it has none, that of the progress it took the place of. */
  id: string | undefined;
  /** The id is in `bytes` (not carried over from one left out). */
  ownId: boolean;
}

/**
 * Thins a server-sent event stream's progress notifications before the SDK parses them, as
 * ThrottledReadBuffer does a stdio server's lines: the SDK parses and validates every event,
 * and a server may send thousands a second. One passes every `intervalMs`; of those in
 * between only the latest is kept, and it goes out before the next other event and at the
 * stream's end (so the last progress still precedes the call's result). Every other event
 * passes at once, as it came. An event is held whole, so the stream must be bounded per
 * event before it gets here (eventBound).
 *
 * Resumption: the SDK resumes a stream from the last event id it saw, so the ids it sees
 * must stay in the stream's order and never pass an event it did not get. Only progress
 * events are left out, the held one goes out before anything after it, and one left out
 * hands its id to the progress that takes its place (written in front of it when that one
 * has none): the SDK's last id is then that of the latest event it got or that was thinned
 * away. A stream that breaks with a progress held resumes from before it (the server
 * sends it again).
 */
export function thinProgressEvents(intervalMs = PROGRESS_PARSE_INTERVAL_MS): TransformStream<Uint8Array, Uint8Array> {
  const events = new EventSplitter();
  let lastPassedAt = Number.NEGATIVE_INFINITY;
  let held: Progress | undefined;

  const emit = (p: Progress, c: TransformStreamDefaultController<Uint8Array>) => {
    if (!p.ownId && p.id !== undefined) c.enqueue(new TextEncoder().encode(`id: ${p.id}\n`));
    c.enqueue(p.bytes);
  };
  const release = (c: TransformStreamDefaultController<Uint8Array>) => {
    if (held) emit(held, c);
    held = undefined;
  };
  const onEvent = (bytes: Uint8Array, c: TransformStreamDefaultController<Uint8Array>) => {
    const progress = readProgress(bytes);
    if (!progress) {
      release(c);
      c.enqueue(bytes);
      return;
    }
    const next: Progress = { bytes, id: progress.id ?? held?.id, ownId: progress.id !== undefined };
    const now = Date.now();
    if (now - lastPassedAt < intervalMs) {
      held = next;
      return;
    }
    lastPassedAt = now;
    held = undefined;
    emit(next, c);
  };

  return new TransformStream({
    transform(chunk, c) {
      events.push(chunk, (bytes) => onEvent(bytes, c));
    },
    flush(c) {
      const rest = events.end((bytes) => onEvent(bytes, c));
      release(c);
      // An event the stream ended inside of: the SDK's parser drops it, as it would have.
      if (rest) c.enqueue(rest);
    },
  });
}

/**
 * When `event` (whole, with its blank line) is a progress notification the SDK would read
 * (type `message`; no field but data, id and event, so none the SDK acts on is lost): its
 * id. The same check as a stdio server's line, on the event's data.
 */
function readProgress(event: Uint8Array): { id: string | undefined } | undefined {
  const text = Buffer.from(event.buffer, event.byteOffset, event.byteLength).toString('utf8');
  // Cheap first: no data line of an event lacking these is a progress notification.
  if (!isProgressLine(text)) return undefined;
  const data: string[] = [];
  let id: string | undefined;
  for (const line of text.split(/\r\n|\r|\n/)) {
    if (line === '') break; // the blank line that ends the event
    if (line.startsWith(':')) continue; // a comment
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(line[colon + 1] === ' ' ? colon + 2 : colon + 1);
    if (field === 'data') data.push(value);
    // As the SDK's parser reads ids: one with a NUL is ignored, an empty one the SDK skips.
    else if (field === 'id') id = value.includes('\0') ? id : value || undefined;
    else if (field !== 'event' || (value !== '' && value !== 'message')) return undefined;
  }
  return data.length > 0 && isProgressLine(data.join('\n')) ? { id } : undefined;
}

/**
 * Cuts a server-sent event stream, in chunks cut anywhere, into whole events: each up to and
 * with the blank line that ends it (CR, LF or CRLF line ends), the LF of a CRLF included, so
 * an event never starts with half a line end.
 */
class EventSplitter {
  #parts: Uint8Array[] = [];
  /** No byte of the current line has been read. */
  #lineEmpty = true;
  /** The last byte read was a CR: an LF next is part of the same line end. */
  #afterCR = false;
  /** That CR ended a blank line: the event is whole once the byte after it shows whether an LF belongs to it. */
  #endedAtCR = false;

  push(chunk: Uint8Array, onEvent: (event: Uint8Array) => void): void {
    let start = 0;
    let i = 0;
    // The next CR and LF at or after where the search last started; -1 once there is none.
    let cr = -2;
    let lf = -2;
    while (i < chunk.length) {
      if (this.#afterCR) {
        this.#afterCR = false;
        if (chunk[i] === LF) i++;
        if (this.#endedAtCR) {
          this.#endedAtCR = false;
          onEvent(this.#take(chunk, start, i));
          start = i;
        }
        continue;
      }
      // Each searched for again only once passed: one pass over the chunk, however many lines.
      if (cr !== -1 && cr < i) cr = chunk.indexOf(CR, i);
      if (lf !== -1 && lf < i) lf = chunk.indexOf(LF, i);
      const end = cr < 0 ? lf : lf < 0 ? cr : Math.min(cr, lf);
      if (end < 0) {
        this.#lineEmpty = false;
        break;
      }
      const blank = this.#lineEmpty && end === i;
      this.#lineEmpty = true;
      i = end + 1;
      if (chunk[end] === CR) {
        this.#afterCR = true;
        this.#endedAtCR = blank;
      } else if (blank) {
        onEvent(this.#take(chunk, start, i));
        start = i;
      }
    }
    if (start < chunk.length) this.#parts.push(chunk.subarray(start));
  }

  /** At the stream's end: an event ended by a CR goes to `onEvent`; the bytes of one never ended are returned. */
  end(onEvent: (event: Uint8Array) => void): Uint8Array | undefined {
    if (this.#endedAtCR) onEvent(this.#take(new Uint8Array(0), 0, 0));
    this.#afterCR = false;
    this.#endedAtCR = false;
    return this.#parts.length > 0 ? this.#take(new Uint8Array(0), 0, 0) : undefined;
  }

  /** The bytes read before and `chunk[start, end)`, as one. */
  #take(chunk: Uint8Array, start: number, end: number): Uint8Array {
    if (end > start) this.#parts.push(chunk.subarray(start, end));
    const parts = this.#parts;
    this.#parts = [];
    return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
  }
}
