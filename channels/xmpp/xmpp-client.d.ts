/**
 * The part of @xmpp/client (0.14, which ships no types) this kind uses, as its README and
 * source describe it.
 */
declare module '@xmpp/client' {
  import type { EventEmitter } from 'node:events';

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

  export interface XmppClient extends EventEmitter {
    status: string;
    jid: Jid | undefined;
    start(): Promise<Jid>;
    stop(): Promise<void>;
    send(element: Element): Promise<void>;
    reconnect: EventEmitter & { delay: number; stop(): void };
    iqCaller: { request(element: Element, timeoutMs?: number): Promise<Element> };
    iqCallee: { get(xmlns: string, name: string, handler: () => Element | Record<string, never>): void };
    streamManagement: EventEmitter & { enabled: boolean; id: string };
  }

  export function client(options: { service: string; domain: string; username: string; password: string; resource?: string }): XmppClient;
}
