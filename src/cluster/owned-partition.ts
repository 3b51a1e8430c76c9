import type { ConsumerMessages } from '@nats-io/jetstream';
import type { HeldLease } from './leases.js';
import type { WaitingForChannel } from './waiting-channels.js';

/**
 * How long one pull request of a partition's consumer waits on the server: one lease TTL
 * (at least 1 s, as nats.js requires; at most nats.js's default of 30 s, never longer). nats.js
 * asks for an idle heartbeat every half of it and, once two are missed, checks the consumer
 * and pulls again, so a pull the server never got or forgot (a NATS cluster's route or a
 * stream leader's change can lose one) holds the partition's messages for one to one and a
 * half TTL, about what a dead owner's takeover takes; with nats.js's default the partition's
 * next message waited 45 s in test/cluster/pull-lost.test.ts. An idle partition costs a pull,
 * a heartbeat and an expiry notice per TTL.
 */
export function pullExpiresMs(leaseTtlMs: number): number {
  return Math.min(30_000, Math.max(1000, leaseTtlMs));
}

export interface Owned {
  partition: number;
  lease: HeldLease;
  messages?: ConsumerMessages;
  loop?: Promise<void>;
  /** Set when this instance lets go (rebalancing, shutdown): the loop hands in nothing more. */
  leaving: boolean;
  /** The hand-back under way, if any (shutdown waits for one begun by the balancing). */
  left?: Promise<void>;
  /** The hand-back's last writes settled: the lease goes now, and what is left is the next owner's. */
  settled?: boolean;
  /** Items whose channel this instance does not run yet. */
  waiting: WaitingForChannel;
  /** The items being handed to the dispatcher, one after another, so a conversation keeps its order. */
  admitting: Promise<unknown>;
  /** A balancing step's admission of waiting items is queued or running (one at a time, not one per step). */
  admittingWaiting: boolean;
  /**
   * While the takeover's backlog is handed in: the scopes held back because an item of theirs
   * ran before (reply refs), released once the backlog is in (#backlogIn), so each broken-off
   * batch starts again as one turn (takeBatch) instead of a turn per item as it arrives.
   */
  held?: Map<string, () => void>;
}

/** The takeover's backlog is handed in: the scopes held for it (Owned.held) may start their turns. */
export function backlogIn(o: Owned): void {
  const held = o.held;
  o.held = undefined;
  for (const release of held?.values() ?? []) release();
}
