/**
 * The part of @xmpp/client (0.14, which ships no types) this kind uses, as its README and
 * source describe it.
 */
declare module '@xmpp/client' {
  import type { EventEmitter } from 'node:events';
  import type { Socket } from 'node:net';

  export interface Element {
    name: string;
    attrs: Record<string, string | undefined>;
    children: Array<Element | string>;
    getChild(name: string, xmlns?: string): Element | undefined;
    getChildren(name: string, xmlns?: string): Element[];
    getChildText(name: string, xmlns?: string): string | null;
    getChildElements(): Element[];
    text(): string;
    is(name: string, xmlns?: string): boolean;
  }

  export function xml(name: string, attrs?: Record<string, string | undefined> | null, ...children: Array<Element | string | undefined>): Element;

  export interface Jid {
    local: string;
    domain: string;
    resource: string;
    bare(): Jid;
    toString(): string;
  }

  export function jid(address: string): Jid;

  /**
   * @xmpp/xml's stream parser (@xmpp/connection-tcp's `Parser`): `write` takes what the socket
   * read; ltx's events call the `on…` methods, which build the stanza under `cursor`.
   */
  export interface XmlParser extends EventEmitter {
    root: Element | null;
    cursor: Element | null;
    write(data: string): void;
    onStartElement(name: string, attrs: Record<string, string>): void;
    onEndElement(name: string): void;
    onText(text: string): void;
  }

  export type XmlParserClass = new () => XmlParser;

  export interface XmppClient extends EventEmitter {
    status: string;
    /**
     * The class each stream is parsed with: `connect()` sets it to the transport's, `open()`
     * (every stream, restarts and reconnects included) constructs it.
     */
    Parser: XmlParserClass;
    /** The connection's socket while there is one; its "close" is the client's "disconnect". */
    socket: Socket | null;
    /** The current stream's parser; null once the stream ended or the parser failed, until the next. */
    parser: XmlParser | null;
    /**
     * What the socket read, for the parser (@xmpp/connection's `_onData`): bound once, as the
     * first socket is attached, so an own property set before `start()` takes its place.
     */
    _onData(data: Buffer): void;
    sendMany(elements: Element[]): Promise<void>;
    /** Raw text onto the stream (as `send`, which serialises an element, does). */
    write(data: string): Promise<void>;
    jid: Jid | undefined;
    start(): Promise<Jid>;
    stop(): Promise<void>;
    send(element: Element): Promise<void>;
    reconnect: EventEmitter & { delay: number; stop(): void };
    iqCaller: { request(element: Element, timeoutMs?: number): Promise<Element> };
    iqCallee: { get(xmlns: string, name: string, handler: () => Element | Record<string, never>): void };
    /** `inbound`: the stanzas handled, as the 'h' of XEP-0198 acknowledgements. */
    streamManagement: EventEmitter & { enabled: boolean; id: string; inbound: number };
  }

  export function client(options: { service: string; domain: string; username: string; password: string; resource?: string }): XmppClient;
}
