import type { ChannelAdapter, Deliver } from '../contracts/channel.js';
import type { Leases } from './leases.js';

/**
 * The adapter with `listen` run under a lease: it waits (showing `standby` and the owner)
 * until the lease is this instance's, listens while it holds it, and ends with the
 * lease-lost error (retryable: the supervisor goes back to waiting) when it is taken.
 * Every other call reaches the adapter unchanged: replies go out from any instance.
 */
export function leasedAdapter(adapter: ChannelAdapter, key: string, leases: Leases): ChannelAdapter {
  const listen: ChannelAdapter['listen'] = async (deliver: Deliver, signal, onConnected, onReconnecting, onStandby) => {
    const held = await leases.acquire(key, signal, (owner) => onStandby?.(owner ? `${owner} holds ${key}` : `waiting for ${key}`));
    if (!held) return;
    const both = AbortSignal.any([signal, held.signal]);
    try {
      await adapter.listen(deliver, both, onConnected, onReconnecting);
    } finally {
      await held.release();
    }
    if (held.signal.aborted && !signal.aborted) throw held.signal.reason;
  };
  return new Proxy(adapter, {
    get(target, prop) {
      if (prop === 'listen') return listen;
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}
