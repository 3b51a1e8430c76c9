import type { ChannelMessage } from '../contracts/message.js';
import type { InboxItem } from '../inbox/item.js';
import type { LifecycleObserver, LocalItemStore } from '../inbox/lifecycle.js';
import { errorType, takeCarrier, type Attributes } from '../observe/trace/ambient.js';
import type { TokenSpan, TraceBackend, TraceToken } from '../observe/trace/otel.js';
import type { ExecuteTurn, RemoteInbox } from './dispatcher.js';

/**
 * One trace per message, from the dispatcher's side: `receive` (the root: access rules and
 * storing, while the platform waits for its ack), `store` (the inbox write, or the publish
 * to the cluster's shared inbox, whose NATS headers carry the context on), `queued` (in
 * its conversation's lane), and `turn`, under which the runtime's spans (model calls, tools,
 * platform requests, the final delivery) follow through the async context. Items collected
 * into one turn link their traces to it. Attributes name channels and ids, never text.
 */
export interface MessageTracing {
  deliver(deliver: (msg: ChannelMessage) => Promise<boolean>): (msg: ChannelMessage) => Promise<boolean>;
  inbox<I extends LocalItemStore | RemoteInbox>(inbox: I): I;
  readonly observers: readonly LifecycleObserver[];
  execute(execute: ExecuteTurn): ExecuteTurn;
}

/** With tracing off: everything passes through untouched, nothing is added. */
export const UNTRACED: MessageTracing = {
  deliver: (d) => d,
  inbox: (i) => i,
  observers: [],
  execute: (e) => e,
};

const messageAttributes = (msg: ChannelMessage): Attributes => ({
  'channeld.channel': msg.channelId,
  'channeld.platform': msg.kind,
  'channeld.message.id': msg.messageId,
  'channeld.chat.type': msg.chat.type,
});

/** Inbox methods that store a new message (and so make the `store` span). */
const storing = new Set(['tryAdd', 'addDurable', 'store', 'publish']);

/** Runs `fn` with `span` active, tells `settled` what it resolved with, marks a rejection, ends the span. */
async function within<T>(span: TokenSpan, fn: () => Promise<T>, settled: (out: T) => void): Promise<T> {
  try {
    const out = await span.run(fn);
    settled(out);
    return out;
  } catch (err) {
    span.fail(errorType(err));
    throw err;
  } finally {
    span.end();
  }
}

export function messageTracing(backend: TraceBackend): MessageTracing {
  /** Each queued item's trace, and its `queued` span until its turn starts or it leaves the lane. */
  const items = new WeakMap<InboxItem, { token: TraceToken; queued: TokenSpan }>();
  const leave = (list: readonly InboxItem[], outcome: string) => {
    for (const it of list) {
      const t = items.get(it);
      t?.queued.set({ 'channeld.queue.outcome': outcome });
      t?.queued.end();
    }
  };

  /** An item with no trace to continue (left by a previous process): a new trace, its root a moment. */
  const recovered = (msg: ChannelMessage): TraceToken => {
    const root = backend.root('recovered', messageAttributes(msg), 'internal');
    root.end();
    return root.token;
  };

  const observer: LifecycleObserver = {
    queued: (item) => {
      // From another instance: the context its NATS headers carried; here: the receive span's.
      const carrier = takeCarrier(item.message);
      const token = (carrier && backend.extract(carrier)) || backend.capture() || recovered(item.message);
      items.set(item, { token, queued: backend.child(token, 'queued', { 'channeld.channel': item.message.channelId }, 'internal') });
    },
    started: (list) => leave(list, 'started'),
    dropped: (list) => leave(list, 'dropped'),
    released: (list) => leave(list, 'released'),
  };

  return {
    deliver: (deliver) => async (msg) => {
      const span = backend.root('receive', messageAttributes(msg), 'consumer');
      return within(
        span,
        () => deliver(msg),
        (taken) => span.set({ 'channeld.message.taken': taken }),
      );
    },
    inbox: (inbox) =>
      new Proxy(inbox, {
        // Getters and methods run on the inbox itself: its private fields are not on the proxy.
        get(target, key) {
          const value: unknown = Reflect.get(target, key);
          if (typeof value !== 'function') return value;
          const fn = value as (...args: unknown[]) => unknown;
          if (typeof key !== 'string' || !storing.has(key)) return fn.bind(target);
          return async (...args: unknown[]) => {
            const parent = backend.capture();
            if (!parent) return fn.apply(target, args);
            const remote = key === 'publish';
            const span = backend.child(
              parent,
              remote ? 'store publish' : 'store',
              { 'channeld.store': remote ? 'cluster' : 'sqlite' },
              remote ? 'producer' : 'internal',
            );
            // The local inbox answers an id (undefined: a redelivery), the shared one what it did.
            return within(
              span,
              async () => fn.apply(target, args),
              (out) => span.set({ 'channeld.store.result': typeof out === 'string' ? out : out === undefined ? 'duplicate' : 'stored' }),
            );
          };
        },
      }),
    observers: [observer],
    execute: (execute) => async (job, signal) => {
      const first = job.items[0];
      const own = first && items.get(first);
      const links = job.items.slice(1).flatMap((it) => {
        const t = items.get(it);
        return t ? [t.token] : [];
      });
      const attributes = { 'channeld.channel': first?.message.channelId, 'channeld.turn.id': job.id, 'channeld.turn.messages': job.items.length };
      const span = own ? backend.child(own.token, 'turn', attributes, 'internal', links) : backend.root('turn', attributes, 'internal');
      return within(
        span,
        () => execute(job, signal),
        (ending) => {
          span.set({ 'channeld.turn.outcome': ending });
          if (ending === 'error') span.fail('TURN_FAILED');
        },
      );
    },
  };
}
