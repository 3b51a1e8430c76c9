import type { ChannelMessage } from '../contracts/message.js';
import type { InboxItem } from '../inbox/item.js';
import type { LifecycleObserver } from '../inbox/lifecycle.js';
import type { TopologyIntake } from '../contracts/topology.js';
import { errorType, takeCarrier, type Attributes } from '../observe/trace/ambient.js';
import type { TokenSpan, TraceBackend, TraceToken } from '../observe/trace/otel.js';
import type { DispatchTopology, ExecuteTurn } from './options.js';

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
  topology<T extends DispatchTopology>(topology: T): T;
  readonly observers: readonly LifecycleObserver[];
  execute(execute: ExecuteTurn): ExecuteTurn;
}

/** With tracing off: everything passes through untouched, nothing is added. */
export const UNTRACED: MessageTracing = {
  deliver: (d) => d,
  topology: (t) => t,
  observers: [],
  execute: (e) => e,
};

const messageAttributes = (msg: ChannelMessage): Attributes => ({
  'channeld.channel': msg.channelId,
  'channeld.platform': msg.kind,
  'channeld.message.id': msg.messageId,
  'channeld.chat.type': msg.chat.type,
});

/** Intake methods that store new messages (and so make the `store` span). */
const storing = new Set(['receive', 'receiveBatch']);

/** What a store did, as a span attribute: stored, duplicate or full (a batch: how many). */
function admissionName(out: unknown): string {
  if (Array.isArray(out)) return `batch of ${out.length}`;
  return typeof out === 'string' ? out : 'stored';
}

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

/** A property of `target` read on `target` itself (its private fields are not on a proxy), methods bound to it. */
function bound(target: object, key: string | symbol): unknown {
  const value: unknown = Reflect.get(target, key);
  return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
}

export function messageTracing(backend: TraceBackend): MessageTracing {
  /**
   * The intake with a `store` span around each store: `store publish` (a producer span whose
   * context the NATS headers carry on) where the cluster's shared stream stores it.
   */
  const tracedIntake = (intake: TopologyIntake): TopologyIntake =>
    new Proxy(intake, {
      get(target, key) {
        const fn = bound(target, key);
        if (typeof fn !== 'function' || typeof key !== 'string' || !storing.has(key)) return fn;
        const call = fn as (...args: unknown[]) => Promise<unknown>;
        return async (...args: unknown[]) => {
          const parent = backend.capture();
          if (!parent) return call(...args);
          const shared = target.store === 'jetstream';
          const span = backend.child(
            parent,
            shared ? 'store publish' : 'store',
            { 'channeld.store': shared ? 'cluster' : 'sqlite' },
            shared ? 'producer' : 'internal',
          );
          return within(
            span,
            async () => call(...args),
            (out) => span.set({ 'channeld.store.result': admissionName(out) }),
          );
        };
      },
    });

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
    topology: (topology) => {
      const intake = tracedIntake(topology.intake);
      return new Proxy(topology, {
        get: (target, key) => (key === 'intake' ? intake : bound(target, key)),
      });
    },
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
