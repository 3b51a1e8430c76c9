import type { ChannelConfig } from '../config/schema.js';
import type { ChannelAdapter, Deliver } from '../contracts/channel.js';
import type { Leases } from './leases.js';

/**
 * Whether a channel's listener may run on one instance only: polling (Telegram getUpdates
 * answers 409 to a second poller), gateways (Discord) and sockets (Slack Socket Mode).
 * Webhook channels and the web chat accept on every instance behind the load balancer.
 */
export function needsLease(config: ChannelConfig): boolean {
  switch (config.type) {
    case 'telegram':
      return config.mode === 'polling';
    case 'slack':
      return config.mode === 'socket';
    case 'discord':
      return true;
    case 'webchat':
      return false;
  }
}

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
