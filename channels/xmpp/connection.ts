import { type Element, type XmlParserClass, xml, type XmppClient } from '@xmpp/client';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { boundedParser, MAX_STANZA_BYTES, MAX_STANZA_DEPTH, type Overrun } from './bounds.js';

const NS_SM = 'urn:xmpp:sm:3';
const NS_STREAMS = 'urn:ietf:params:xml:ns:xmpp-streams';
const STANZAS: ReadonlySet<string> = new Set(['message', 'presence', 'iq']);
/**
 * How long a server gets to close its side of a connection channeld ends before the socket is
 * destroyed. Shorter than @xmpp/connection's own wait for the close (its `timeout`, 2 s), after
 * which it lets go of the socket without destroying it: left open, with no "error" listener.
 */
const STREAM_CLOSE_WAIT_MS = 1000;

export interface ConnectionGuard {
  /** Why channeld ended the last connection, for /status while it reconnects; forgotten once read. */
  takeReason(): string | undefined;
}

/**
 * What channeld adds to @xmpp/connection (0.14) for each connection of `x`; installed before
 * the first `start()`. Each stream is parsed with bounds (see bounds.ts): past them the stream
 * ends with `policy-violation`. On XML the parser cannot take, @xmpp/connection itself sends
 * `bad-format`, lets go of the parser and closes the stream, as it lets go of the parser when
 * the server closes the stream; but the socket stays until the server closes it, and what it
 * reads meanwhile goes to the parser let go of (`this.parser.write` on null: a TypeError
 * thrown in the socket's "data" listener, which ends the daemon). So a read with no parser is
 * dropped, and a connection whose stream ended has its socket destroyed if the server does not
 * close it soon. The socket's close is the "disconnect" @xmpp/client's reconnect acts on, with
 * its backoff.
 */
export function guardConnection(x: XmppClient, log: Logger, channel: string): ConnectionGuard {
  let reason: string | undefined;
  const ending = new WeakSet<Socket>();
  /** Destroys `socket` unless it closes within STREAM_CLOSE_WAIT_MS; ends our side first when `end`. */
  const closeSoon = (socket: Socket | null, end: boolean): void => {
    if (!socket) return;
    if (end) socket.end();
    if (ending.has(socket)) return;
    ending.add(socket);
    const t = setTimeout(() => socket.destroy(), STREAM_CLOSE_WAIT_MS);
    socket.once('close', () => clearTimeout(t));
  };

  // @xmpp/client's connect() sets `Parser` to its transport's, open() constructs it for every
  // stream (restarts and reconnects too).
  let transportParser: XmlParserClass | undefined;
  let parser: XmlParserClass | undefined;
  Object.defineProperty(x, 'Parser', {
    configurable: true,
    get: () => parser,
    set: (P: XmlParserClass) => {
      if (P === transportParser) return;
      transportParser = P;
      parser = boundedParser(
        P,
        { maxBytes: MAX_STANZA_BYTES, maxDepth: MAX_STANZA_DEPTH },
        {
          overrun: (o) => {
            reason = `${o.reason}; the connection was ended (policy-violation) and is made again`;
            overrun(x, o, log, channel, closeSoon);
          },
          error: (err) => {
            const why = `XMPP: the server sent XML that cannot be parsed (${err.message})`;
            log.warn({ channel, reason: why }, 'XMPP stream not well-formed; ending the connection (bad-format) to reconnect');
            reason = `${why}; the connection was ended (bad-format) and is made again`;
            // @xmpp/connection sends bad-format and closes the socket next, once the write is
            // done: a server that reads nothing more is not waited for either.
            closeSoon(x.socket, false);
          },
          end: () => {
            // Our own close answered ("closing"): @xmpp/connection closes the socket next.
            if (x.status === 'closing') return;
            // The server's: nothing would close ours. It is closed in turn (RFC 6120 §4.4).
            log.warn({ channel }, 'XMPP stream closed by the server; closing the connection to reconnect');
            reason = 'XMPP: the server closed the stream; the connection is made again';
            void x.write('</stream:stream>').catch(() => {});
            closeSoon(x.socket, true);
          },
        },
      );
    },
  });

  // @xmpp/connection binds `_onData` as it first attaches a socket: every socket reads into this.
  const onData = x._onData;
  x._onData = (data: Buffer): void => {
    if (x.parser) {
      onData.call(x, data);
      return;
    }
    if (!x.socket || ending.has(x.socket)) return;
    log.warn({ channel, bytes: data.length }, 'XMPP data with no stream to read it; ignored, ending the connection');
    closeSoon(x.socket, true);
  };
  // Whatever closes the socket through @xmpp/connection (stop, a stream error, stream
  // management's timeout) waits for the server no longer than channeld does.
  x.on('disconnecting', () => closeSoon(x.socket, false));

  return {
    takeReason: () => {
      const r = reason;
      reason = undefined;
      return r;
    },
  };
}

/**
 * A stanza past the bounds ends the stream with `policy-violation` (RFC 6120 §4.9.3.14);
 * @xmpp/client's reconnect then makes a new one, with its backoff. The stanza is
 * acknowledged (XEP-0198) as handled, dropped on purpose: otherwise the server would give
 * it again on resumption, or from offline storage after, and end every stream alike.
 * Stanzas after it were never acknowledged, so the server keeps them for the next stream.
 */
function overrun(x: XmppClient, o: Overrun, log: Logger, channel: string, closeSoon: (socket: Socket | null, end: boolean) => void): void {
  log.warn({ channel, reason: o.reason }, 'XMPP stanza past the bounds; ending the connection (policy-violation) to reconnect');
  const socket = x.socket;
  if (!socket) return;
  const sm = x.streamManagement;
  const out: Element[] = [];
  if (sm.enabled && o.name !== undefined && STANZAS.has(o.name)) {
    sm.inbound += 1;
    out.push(xml('a', { xmlns: NS_SM, h: String(sm.inbound) }));
  }
  out.push(xml('stream:error', {}, xml('policy-violation', { xmlns: NS_STREAMS }), xml('text', { xmlns: NS_STREAMS }, o.reason)));
  // Not disconnect(): it would wait for a </stream:stream> the stopped parser cannot read,
  // and then let go of whichever parser is attached by then (a reconnect's). The stopped
  // parser stays and swallows the rest until the socket closes; the close is the
  // "disconnect" that @xmpp/client's reconnect acts on. Both writes go out at once, in order.
  void x.sendMany(out).catch(() => {});
  void x.write('</stream:stream>').catch(() => {});
  closeSoon(socket, true);
}
