import type { ChannelAdapter } from '../../contracts/channel.js';
import type { Logger } from '../../observe/logger.js';
import { ListenerGate, type ListenerMove } from './listeners.js';
import { Predecessor, type UpgradeHttp } from './predecessor.js';
import { Successor } from './successor.js';
import { notifySystemd } from './systemd.js';

export type { UpgradeOutcome } from './predecessor.js';

export interface UpgradeWiring {
  log: Logger;
  timeoutMs: () => number;
  /**
   * Cluster mode: exclusive listeners are not handed over, their leases move when the old
   * instance goes away (it releases them as it stops), as partitions do. Listeners every
   * instance runs (webhooks, web chat) overlap as on one node, their state restored.
   */
  cluster: boolean;
  http: UpgradeHttp;
  dispatcher: {
    freeze(): string[];
    deferTurns(): void;
    resumeTurns(waiting?: ReadonlySet<string>, final?: boolean): number;
    trackAdmissions(): void;
    recoverUnheld(): number;
  };
  /** The local store's group commit: committed at the freeze (see freezeFor). */
  storage: FreezeStorage;
  /** The local inbox: read at the freeze when the commit failed (see freezeFor). */
  inbox: FreezeInbox;
  /** A reload is being applied: its channels' gates are being replaced, so none is handed over now. */
  reloading: () => boolean;
}

/** The group commit as the freeze uses it: a commit, and how many writes it still holds. */
export interface FreezeStorage {
  flush(): void;
  status(): { pending_writes: number };
}

export interface FreezeInbox {
  unfinished(): Array<{ scope: string }>;
}

/**
 * The old process's freeze: no turn starts here from now on, and what the turns that ended
 * wrote (their final states ride the group commit, flushed on the next tick) is committed
 * before the new process reads the inbox. Otherwise a turn that had just ended looked
 * unfinished there, neither running here nor done, and was answered a second time.
 *
 * The commit can fail: the new process holds the write lock past busy_timeout as it stores
 * what arrives, and the group commit keeps the writes queued for its retries. Then every
 * conversation with an item still unfinished in the store is listed busy too: the writes
 * that wait are among them (a write here names no conversation), and the new process holds
 * them until this one stopped, which commits them (its store's close tries a last time),
 * and sent `done`. Waiting for the commit instead would have to give up at some bound, and
 * the freeze cannot be undone: past it the choice is answering twice or stalling the
 * hand-over. Holding a few more conversations a little longer loses and doubles nothing.
 */
export function freezeFor(dispatcher: { freeze(): string[] }, storage: FreezeStorage, inbox: FreezeInbox, log?: Logger): () => string[] {
  return () => {
    const busy = dispatcher.freeze();
    storage.flush();
    const pending = storage.status().pending_writes;
    if (pending === 0) return busy;
    const held = [...new Set([...busy, ...inbox.unfinished().map((i) => i.scope)])];
    log?.warn(
      { pending_writes: pending, running: busy.length, busy: held.length },
      "upgrade: the freeze's commit failed; every conversation with an unfinished item waits for this process's stop",
    );
    return held;
  };
}

/**
 * The `upgrade` service: both ends of `channeld upgrade` in one process. As the old
 * process it is `predecessor`; when this process was started by an upgrade it also has a
 * `successor` link, and turns wait until the old process let go of them.
 */
export class Upgrades {
  readonly predecessor: Predecessor;
  readonly successor: Successor | undefined;
  readonly #o: UpgradeWiring;
  /** Started by an upgrade whose hand-over has not finished: the old process's conversations are still held back here. */
  #handingOver: boolean;
  #tookOver: boolean;
  readonly #recovered = new Set<() => void>();

  constructor(o: UpgradeWiring, successor = Successor.fromProcess()) {
    this.#o = o;
    this.successor = successor;
    this.#handingOver = successor !== undefined;
    this.#tookOver = successor === undefined;
    this.predecessor = new Predecessor({
      log: o.log,
      timeoutMs: o.timeoutMs,
      http: o.http,
      freeze: freezeFor(o.dispatcher, o.storage, o.inbox, o.log),
      // Run where the failed process's exit is handled: one that throws must not end the daemon.
      onRecovered: () => {
        for (const listener of this.#recovered)
          try {
            listener();
          } catch (err) {
            o.log.warn({ err }, 'upgrade failed: a listener of the recovery threw');
          }
      },
      watchStored: () => {
        o.dispatcher.trackAdmissions();
        // What this process's ended turns wrote is committed first: a row still reading
        // unfinished would look like one the new process stored.
        return () => {
          o.storage.flush();
          return o.dispatcher.recoverUnheld();
        };
      },
      // A third process would know neither the conversations held back here for the old
      // process nor its running turns, and would run them again.
      // A reload half applied hands over the gates it has replaced so far: one it adds after
      // the hand-over began runs its listener here as well as in the new process.
      refusal: () =>
        this.#handingOver
          ? 'this process was started by an upgrade whose hand-over has not finished (it is not ready yet, or the old process still runs turns); try again once the old process has exited'
          : o.reloading()
            ? 'a reload is being applied (a channel it removes or changes may wait for its running turns); try again once it has finished'
            : undefined,
    });
    // Messages are stored from the start; no turn starts until the old process froze.
    if (successor) o.dispatcher.deferTurns();
  }

  /**
   * A channel's adapter as the supervisor and the turns see it, its listener moved by an
   * upgrade as ListenerMove says: it stops when the new process takes it over and, in a new
   * process on one node, starts only once the old one let go of it. Returns the adapter and
   * its removal.
   */
  wrap(id: string, adapter: ChannelAdapter, exclusive: boolean): { adapter: ChannelAdapter; forget: () => void } {
    const cluster = this.#o.cluster;
    const move: ListenerMove = exclusive ? (cluster ? 'leased' : adapter.upgradeOverlap ? 'overlap' : 'handOver') : 'overlap';
    const successor = this.successor;
    // In cluster mode no listener is asked for: an exclusive one waits for its lease instead.
    const gate = new ListenerGate(adapter, move, successor && !cluster ? () => successor.take(id) : undefined);
    if (move === 'overlap') successor?.onRestore(id, (state) => gate.restore(state));
    this.predecessor.gates.set(id, gate);
    return { adapter: gate.adapter, forget: () => this.predecessor.release(id, gate) };
  }

  /**
   * This process as the new one of an upgrade: `handingOver` from its start until its
   * hand-over finished (it was ready, the old process froze, and that one's turns ended and
   * it let go, or it went away); `failed` once the old process failed the upgrade (it serves
   * on and stops this one); `idle` when it was not started by an upgrade or its hand-over
   * finished. Until then a reload is refused (src/daemon/reload.ts), as an upgrade is.
   */
  get successorPhase(): 'idle' | 'handingOver' | 'failed' {
    if (this.successor?.aborted) return 'failed';
    return this.#handingOver ? 'handingOver' : 'idle';
  }

  /** Calls `listener` each time a failed upgrade's new process is gone and this process serves on; returns its removal. */
  onRecovered(listener: () => void): () => void {
    this.#recovered.add(listener);
    return () => this.#recovered.delete(listener);
  }

  /**
   * This process serves (it was not started by an upgrade, or the old process froze or went
   * away): what the old one left, its run files, is this one's now. A new process stopped
   * before that (a failed upgrade) gives them back.
   */
  get tookOver(): boolean {
    return this.#tookOver;
  }

  /** The daemon is ready (its first listener attempts are done): tell systemd, or the old process. */
  async ready(): Promise<void> {
    const { log, dispatcher } = this.#o;
    const successor = this.successor;
    if (!successor) {
      await notifySystemd(['READY=1'], log);
      return;
    }
    successor.ready();
    const busy = await successor.frozen;
    this.#tookOver = true;
    const queued = dispatcher.resumeTurns(new Set(busy));
    log.info({ queued, waiting_scopes: busy.length }, 'upgrade: took over from the old process');
    await notifySystemd([`MAINPID=${process.pid}`, 'READY=1'], log);
    await successor.done;
    const rest = dispatcher.resumeTurns(new Set(), true);
    this.#handingOver = false;
    log.info({ queued: rest }, "upgrade: the old process's turns ended; their conversations go on here");
    successor.close();
  }
}
