import type { XmlParser, XmlParserClass } from '@xmpp/client';

/** The largest stanza (or other top-level element) taken from the server: far more than any chat message. */
export const MAX_STANZA_BYTES = 1024 * 1024;
/** The deepest nesting of elements in one stanza, the stanza itself being level 1. */
export const MAX_STANZA_DEPTH = 64;

export interface StanzaBounds {
  maxBytes: number;
  maxDepth: number;
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
 * reads nothing more and calls `onOverrun` once; closing the stream is the caller's part.
 */
export function boundedParser(Base: XmlParserClass, bounds: StanzaBounds, onOverrun: (o: Overrun) => void): XmlParserClass {
  return class BoundedParser extends Base implements XmlParser {
    /** Open elements, the stream's own included: a stanza is level 2. */
    #depth = 0;
    #bytes = 0;
    /** A top-level element ended during the current write. */
    #ended = false;
    #top: string | undefined;
    #stopped = false;

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

    override write(data: string): void {
      if (this.#stopped) return;
      this.#bytes += Buffer.byteLength(data);
      this.#ended = false;
      super.write(data);
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
      onOverrun({ reason, name: this.#depth >= 2 ? this.#top : undefined });
    }
  };
}
