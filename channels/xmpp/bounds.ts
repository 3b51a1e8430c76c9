import type { XmlParser, XmlParserClass } from '@xmpp/client';

/** The largest stanza (or other top-level element) taken from the server: far more than any chat message. */
export const MAX_STANZA_BYTES = 1024 * 1024;
/** The deepest nesting of elements in one stanza, the stanza itself being level 1. */
export const MAX_STANZA_DEPTH = 64;

export interface StanzaBounds {
  maxBytes: number;
  maxDepth: number;
}

export interface ParserEvents {
  /** Past a bound: the parser has stopped. */
  overrun(o: Overrun): void;
  /** XML it cannot take: the parser has stopped. */
  error(err: Error): void;
  /** The server's </stream:stream>. */
  end(): void;
}

export interface Overrun {
  /** Why, for the log and /status. */
  reason: string;
  /** The top-level element's name ("message", "iq", …) where it had begun. */
  name: string | undefined;
}

/**
 * @xmpp/client's TCP stream parser (@xmpp/xml over ltx) with bounds. Unbounded, it keeps
 * one stanza whole in memory however large or deep the server sends it: ltx even holds an
 * unfinished text or attribute in a buffer of its own, without telling anyone, until it
 * ends. So the bytes written in since the last top-level element ended are counted (a read
 * that ends one and begins the next counts from zero after it: at most one socket read,
 * 64 KiB, goes uncounted), and the depth of open elements. Past either bound the parser
 * reads nothing more and calls `on.overrun` once; closing the stream is the caller's part.
 *
 * It also reads nothing more after its first error or the stream's end: @xmpp/connection
 * stops listening then, and a second "error" event with no listener would be thrown. What
 * the parsers throw themselves (ltx on an undefined entity, @xmpp/xml on an end tag before
 * any start tag) becomes that error event: thrown, it would escape the socket's "data"
 * listener and end the process. `on.error` and `on.end` hear of either before @xmpp/connection.
 */
export function boundedParser(Base: XmlParserClass, bounds: StanzaBounds, on: ParserEvents): XmlParserClass {
  return class BoundedParser extends Base implements XmlParser {
    /** Open elements, the stream's own included: a stanza is level 2. */
    #depth = 0;
    #bytes = 0;
    /** A top-level element ended during the current write. */
    #ended = false;
    #top: string | undefined;
    #stopped = false;
    /** What a listener threw out of `emit`. */
    #thrown: unknown;

    override onStartElement(name: string, attrs: Record<string, string>): void {
      if (this.#stopped) return;
      this.#depth++;
      if (this.#depth === 2) this.#top = name;
      if (this.#depth - 1 > bounds.maxDepth) {
        this.#stop(`XMPP: a <${this.#top}> nests elements deeper than ${bounds.maxDepth} levels`);
        return;
      }
      super.onStartElement(name, attrs);
    }

    override onEndElement(name: string): void {
      if (this.#stopped) return;
      this.#depth--;
      if (this.#depth === 1) this.#ended = true;
      super.onEndElement(name);
    }

    override onText(text: string): void {
      if (this.#stopped) return;
      super.onText(text);
    }

    override emit(event: string | symbol, ...args: unknown[]): boolean {
      if (this.#stopped) return false;
      if (event === 'error' || event === 'end') {
        this.#stopped = true;
        if (event === 'end') on.end();
        else {
          on.error(args[0] instanceof Error ? args[0] : new Error(String(args[0])));
          if (this.listenerCount('error') === 0) return false;
        }
      }
      try {
        return super.emit(event, ...args);
      } catch (err) {
        this.#thrown = err;
        throw err;
      }
    }

    override write(data: string): void {
      if (this.#stopped) return;
      this.#bytes += Buffer.byteLength(data);
      this.#ended = false;
      try {
        super.write(data);
      } catch (err) {
        // A listener's throw (@xmpp/connection's, the adapter's through it) is a fault of ours,
        // not the server's XML: it goes on as it would have.
        const ours = err === this.#thrown;
        this.#thrown = undefined;
        if (ours) throw err;
        this.emit('error', err);
        return;
      }
      if (this.#stopped) return;
      if (this.#ended) this.#bytes = 0;
      else if (this.#bytes > bounds.maxBytes)
        this.#stop(
          this.#depth >= 2
            ? `XMPP: the server sent more than ${bounds.maxBytes} bytes of one <${this.#top}> without ending it`
            : `XMPP: the server sent more than ${bounds.maxBytes} bytes without a stanza ending`,
        );
    }

    #stop(reason: string): void {
      this.#stopped = true;
      // What was built of the stanza is garbage once nothing points at it.
      this.cursor = this.root;
      on.overrun({ reason, name: this.#depth >= 2 ? this.#top : undefined });
    }
  };
}
