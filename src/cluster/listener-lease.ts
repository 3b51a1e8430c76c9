import type { ChannelAdapter, Deliver } from '../contracts/channel.js';
import { ChannelError } from '../contracts/errors.js';
import { sleep } from '../util/abortable.js';
import type { Leases } from './leases.js';
import { boundView } from '../util/bound-view.js';

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
  return boundView(adapter, { listen });
}

/**
 * A listener split into `parts` (gateway shards), each part under its own lease
 * `<key>.<part>` and run by the adapter's `listenPart`, so the parts spread over the
 * instances: an instance takes a free part only while it holds fewer than its share
 * (`ceil(parts / live instances)`, the live ones read from their heartbeat leases) and hands
 * back its highest part while it holds more (a joining instance gets its share within a lease
 * step). A part whose lease is lost goes back to waiting without touching the others; a part
 * that fails ends the whole listener (released leases pass at once) for the supervisor's backoff.
 * The supervisor sees `connected` while any part here is, and `standby` (with every part's
 * holder) while this instance holds none.
 */
export function leasedParts(adapter: ChannelAdapter, key: string, parts: number, leases: Leases): ChannelAdapter {
  const stepMs = Math.max(100, Math.floor(leases.ttlMs / 5));
  const share = () => Math.ceil(parts / Math.max(1, leases.table('inst.').filter((r) => !r.expired).length));
  const listen: ChannelAdapter['listen'] = async (deliver: Deliver, signal, onConnected, onReconnecting, onStandby) => {
    const failed = new AbortController();
    const both = AbortSignal.any([signal, failed.signal]);
    const held = new Set<number>();
    const keyOf = (i: number) => `${key}.${i}`;
    const standby = () => {
      if (held.size || both.aborted) return;
      const holders = Array.from({ length: parts }, (_, i) => `${keyOf(i)}: ${leases.ownerOf(keyOf(i)) ?? 'free'}`);
      onStandby?.(holders.join(', '));
    };
    const part = async (i: number) => {
      while (!both.aborted) {
        // At its share, this instance leaves free parts to the others; it asks again each step.
        const full = new AbortController();
        const lease =
          held.size < share()
            ? await leases.acquire(keyOf(i), AbortSignal.any([both, full.signal]), () => {
                standby();
                if (held.size >= share()) full.abort();
              })
            : undefined;
        if (!lease) {
          standby();
          await sleep(stepMs + Math.floor(Math.random() * stepMs), both);
          continue;
        }
        held.add(i);
        const handBack = new AbortController();
        // Past its share (an instance joined), the highest part held goes back to the others.
        const balancing = setInterval(() => {
          if (held.size > share() && i === Math.max(...held)) handBack.abort();
        }, stepMs);
        try {
          await adapter.listenPart!(i, deliver, AbortSignal.any([both, lease.signal, handBack.signal]), onConnected, onReconnecting);
          if (!both.aborted && !lease.signal.aborted && !handBack.signal.aborted)
            throw new ChannelError('CHANNEL_ENDED', `listener part ${keyOf(i)} returned on its own`);
        } finally {
          clearInterval(balancing);
          held.delete(i);
          await lease.release();
        }
        standby();
      }
    };
    let first: unknown;
    await Promise.all(
      Array.from({ length: parts }, (_, i) =>
        part(i).catch((err: unknown) => {
          first ??= err;
          failed.abort(err);
        }),
      ),
    );
    if (first !== undefined && !signal.aborted) throw first;
  };
  return boundView(adapter, { listen });
}
