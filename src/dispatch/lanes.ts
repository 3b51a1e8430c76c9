import type { DaemonConfig, QueueMode } from '../config/schema.js';
import type { Logger } from '../observe/logger.js';
import type { InboxItem } from '../inbox/item.js';
import type { TurnEndingKind } from '../contracts/agent-events.js';
import type { ItemLifecycle } from '../inbox/lifecycle.js';
import type { ChannelMessage, MessageRef } from '../contracts/message.js';
import { settleWithin } from '../util/abortable.js';
import { CodedError } from '../contracts/errors.js';
import { interrupts, isFiring, takeBatch } from './lane-batch.js';
import { startTurn, stopRunning } from './lane-run.js';

/**
 * After the signal bounding a wait aborts, turns that honour it end within moments; one
 * stuck in a call that ignores its signal is no longer waited for after this long.
 */
const ABANDON_AFTER_MS = 1_000;

/** One turn to run: one inbox item, or several merged by `collect`. */
export interface TurnJob {
  /** The turn's id in the task tracker: its first inbox item. */
  id: string;
  scope: string;
  items: InboxItem[];
  /** The text the agent answers: one message's, or the collected ones joined. */
  text: string;
  passive: ChannelMessage[];
  /** The executor reports the messages answering the turn (through the item lifecycle). */
  replied(refs: readonly MessageRef[]): void;
  /** Stops this turn alone (its conversation's queue stays): the platform's user stopped its answer. */
  stop(reason: string): void;
}

export interface Lane {
  scope: string;
  channelId: string;
  queue: InboxItem[];
  passive: ChannelMessage[];
  /** `stoppedByUser`: a user or the operator stopped it (see `stopRunning`). */
  running?: { job: TurnJob; controller: AbortController; done: Promise<void>; stoppedByUser?: boolean };
  mode: QueueMode;
  /** collect: merging waits this long after the newest arrival. */
  notBeforeMs: number;
}

interface LanesOptions {
  limits(): DaemonConfig['limits'];
  channelLimit(channelId: string): number | undefined;
  /** The agent a channel is bound to, and that agent's max_in_flight. */
  agentLimit?(channelId: string): { agent: string; max: number | undefined };
  execute(job: TurnJob, signal: AbortSignal): Promise<TurnRunEnding>;
  /** Every item's state change goes through it (it persists and tells metrics and the tracker). */
  lifecycle: ItemLifecycle;
  log: Logger;
}

/**
 * How a turn's run ended: as the turn ended (`done`, `error`, `cancelled`), or `unfinished`:
 * it stopped here before its final text went out because this process stops (its hard stop)
 * or lost the conversation (a fence). Nothing is recorded for an unfinished turn, so the next
 * start, or the conversation's next owner, runs it again, as after a kill -9.
 */
export type TurnRunEnding = TurnEndingKind | 'unfinished';

/**
 * The scheduler: one FIFO lane per conversation scope, at most one running turn per lane,
 * the queue modes, max_queued, and the global, per-channel and per-agent in-flight limits
 * across lanes. Lanes wait their turn in arrival order. What an item's state becomes is
 * the item lifecycle's business; lanes only say when.
 */
export class Lanes {
  readonly #o: LanesOptions;
  readonly #lanes = new Map<string, Lane>();
  /** Scopes with queued work and no running turn, oldest first. */
  readonly #ready: string[] = [];
  readonly #perChannel = new Map<string, number>();
  readonly #perAgent = new Map<string, number>();
  #inFlight = 0;
  #queued = 0;
  #timer: NodeJS.Timeout | undefined;
  #draining = false;
  /** Inside `together`: items are accepted, no turn starts yet. */
  #gathering = 0;
  /** Scopes whose turns may not start yet (`hold`), with how many holds each. */
  readonly #held = new Map<string, number>();

  constructor(options: LanesOptions) {
    this.#o = options;
  }

  /** Queues an item; false when `max_queued` is reached (the caller refuses it). */
  accept(item: InboxItem, mode: QueueMode, passive: ChannelMessage[]): boolean {
    // Checked before a lane exists: a refused message from a new conversation leaves nothing
    // behind. Not for a firing: refused, it was lost (marked fired); they are few per conversation.
    const firing = isFiring(item);
    if (this.#queued >= this.#o.limits().max_queued && !firing) return false;
    this.#o.lifecycle.queued(item);
    const lane = this.#lanes.get(item.scope) ?? this.#newLane(item);
    lane.mode = mode;
    lane.passive.push(...passive);
    // The newest message replaces what was waiting and what is running (firings stay).
    if (lane.running && mode === 'interrupt' && interrupts(item, lane.running.job.items)) {
      this.#drop(lane, 'superseded by a newer message', isFiring);
      lane.running.controller.abort(new CodedError('TURN_INTERRUPTED', 'interrupted by a newer message'));
    }
    lane.queue.push(item);
    this.#queued++;
    if (mode === 'collect' && lane.running) lane.notBeforeMs = Date.now() + this.#o.limits().collect_debounce_ms;
    if (!lane.running && !this.#ready.includes(lane.scope)) this.#ready.push(lane.scope);
    this.#pump();
    return true;
  }

  /** Runs `accept` (which accepts items), then starts turns: items recovered together are all queued when the first starts. */
  together(accept: () => void): void {
    this.#gathering++;
    try {
      accept();
    } finally {
      this.#gathering--;
      this.#pump();
    }
  }

  /**
   * Keeps the scope's turns from starting (its items are queued, stoppable and listed) until
   * the returned release, idempotent, is called: more items of a batch run before are still
   * being handed in one at a time (a cluster takeover's backlog), and must start with it.
   */
  hold(scope: string): () => void {
    this.#held.set(scope, (this.#held.get(scope) ?? 0) + 1);
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      const n = this.#held.get(scope)! - 1;
      if (n > 0) this.#held.set(scope, n);
      else this.#held.delete(scope);
      this.#pump();
    };
  }

  #newLane(item: InboxItem): Lane {
    const lane: Lane = { scope: item.scope, channelId: item.message.channelId, queue: [], passive: [], mode: 'followup', notBeforeMs: 0 };
    this.#lanes.set(item.scope, lane);
    return lane;
  }

  /** Drops the lane's queued items (but those `keep` keeps). */
  #drop(lane: Lane, reason: string, keep?: (item: InboxItem) => boolean): number {
    const dropped = keep ? lane.queue.filter((it) => !keep(it)) : lane.queue.splice(0);
    if (keep) lane.queue = lane.queue.filter(keep);
    this.#queued -= dropped.length;
    this.#o.lifecycle.dropped(dropped, reason);
    return dropped.length;
  }

  #canStart(lane: Lane): boolean {
    if (this.#inFlight >= this.#o.limits().max_in_flight) return false;
    const chMax = this.#o.channelLimit(lane.channelId);
    if (chMax !== undefined && (this.#perChannel.get(lane.channelId) ?? 0) >= chMax) return false;
    const agent = this.#o.agentLimit?.(lane.channelId);
    return agent?.max === undefined || (this.#perAgent.get(agent.agent) ?? 0) < agent.max;
  }

  #pump(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#draining || this.#gathering) return;
    let wakeAt = Infinity;
    const maxInFlight = this.#o.limits().max_in_flight;
    for (let i = 0; i < this.#ready.length; ) {
      // Every slot taken: nothing more can start, and the turn that frees one pumps again. Going
      // on would visit every waiting lane per message (10,000 conversations: 10,000 per call).
      if (this.#inFlight >= maxInFlight) break;
      const lane = this.#lanes.get(this.#ready[i]!);
      if (!lane || lane.running || lane.queue.length === 0) {
        this.#ready.splice(i, 1);
        continue;
      }
      if (lane.mode === 'collect' && lane.notBeforeMs > Date.now()) {
        wakeAt = Math.min(wakeAt, lane.notBeforeMs);
        i++;
        continue;
      }
      if (this.#held.has(lane.scope) || !this.#canStart(lane)) {
        i++;
        continue;
      }
      this.#ready.splice(i, 1);
      this.#start(lane);
    }
    if (wakeAt !== Infinity) this.#timer = setTimeout(() => this.#pump(), Math.max(0, wakeAt - Date.now()));
  }

  #start(lane: Lane): void {
    const items = takeBatch(lane);
    this.#queued -= items.length;
    const lifecycle = this.#o.lifecycle;
    lifecycle.started(items);
    const controller = new AbortController();
    const job: TurnJob = {
      id: String(items[0]!.id),
      scope: lane.scope,
      items,
      text: items.map((i) => i.message.text).join('\n\n'),
      passive: lane.passive.splice(0),
      replied: (refs) => lifecycle.replied(items, refs),
      stop: (reason) => (lane.running?.job === job ? stopRunning(lane.running, reason) : controller.abort(new CodedError('TURN_STOPPED', reason))),
    };
    this.#inFlight++;
    this.#perChannel.set(lane.channelId, (this.#perChannel.get(lane.channelId) ?? 0) + 1);
    const agent = this.#o.agentLimit?.(lane.channelId).agent;
    if (agent !== undefined) this.#perAgent.set(agent, (this.#perAgent.get(agent) ?? 0) + 1);
    lane.running = { job, controller, done: this.#run(lane, job, controller.signal, agent) };
  }

  /**
   * Runs one turn and records its end, then frees its slots and pumps. One async function
   * rather than a then/catch/finally chain: a running turn keeps one promise here, not three
   * with their reactions (what each of thousands of running turns keeps is what a burst's
   * collections go through).
   */
  async #run(lane: Lane, job: TurnJob, signal: AbortSignal, agent: string | undefined): Promise<void> {
    const lifecycle = this.#o.lifecycle;
    try {
      let ending: TurnRunEnding;
      try {
        // Always after an await, even for an executor that throws at once: the slot is never
        // freed (and the lanes pumped again) from inside #start, and `lane.running` is set first.
        ending = await startTurn(this.#o.execute, job, signal);
      } catch (err) {
        this.#o.log.error({ err, scope: lane.scope }, 'turn failed outside the runtime');
        lifecycle.finished(job.items, 'error', String(err));
        return;
      }
      if (ending === 'unfinished' && lane.running?.stoppedByUser) lifecycle.finished(job.items, 'cancelled');
      else if (ending === 'unfinished') lifecycle.interrupted(job.items);
      else lifecycle.finished(job.items, ending);
    } catch (err) {
      this.#o.log.error({ err, scope: lane.scope }, 'the end of a turn could not be recorded');
    } finally {
      lane.running = undefined;
      this.#inFlight--;
      this.#perChannel.set(lane.channelId, (this.#perChannel.get(lane.channelId) ?? 1) - 1);
      if (agent !== undefined) this.#perAgent.set(agent, (this.#perAgent.get(agent) ?? 1) - 1);
      if (lane.queue.length) this.#ready.push(lane.scope);
      else this.#forgetIfIdle(lane);
      this.#pump();
    }
  }

  /**
   * /stop in a conversation: cancels the running turn and drops the queued items of
   * `senderId` only (everyone's when undefined). `runningOfAnyone` also cancels the running
   * turn whoever started it (an admin's /stop). Says what it did.
   */
  stopOf(scope: string, senderId: string | undefined, reason: string, runningOfAnyone = false): { cancelled: boolean; dropped: number } {
    const lane = this.#lanes.get(scope);
    if (!lane) return { cancelled: false, dropped: 0 };
    const mine = (it: InboxItem) => senderId === undefined || it.message.sender.id === senderId;
    let dropped = 0;
    if (senderId === undefined) dropped = this.#drop(lane, reason);
    else {
      const gone = lane.queue.filter(mine);
      if (gone.length) {
        lane.queue = lane.queue.filter((it) => !mine(it));
        this.#queued -= gone.length;
        this.#o.lifecycle.dropped(gone, reason);
      }
      dropped = gone.length;
    }
    const running = lane.running;
    const cancel = running !== undefined && (runningOfAnyone || running.job.items.some(mine));
    if (cancel) stopRunning(running, reason);
    this.#forgetIfIdle(lane);
    return { cancelled: cancel, dropped };
  }

  /** Whether `senderId` has a turn running or waiting in this conversation. */
  hasTurnOf(scope: string, senderId: string): boolean {
    const lane = this.#lanes.get(scope);
    if (!lane) return false;
    return lane.queue.some((it) => it.message.sender.id === senderId) || (lane.running?.job.items.some((it) => it.message.sender.id === senderId) ?? false);
  }

  /**
   * A lane with nothing running or queued is forgotten (with any context it gathered for
   * messages that were dropped): lanes are keyed by conversation, so only busy ones stay,
   * at most max_in_flight + max_queued of them.
   */
  #forgetIfIdle(lane: Lane): void {
    if (!lane.running && !lane.queue.length && this.#lanes.get(lane.scope) === lane) this.#lanes.delete(lane.scope);
  }

  /** Lanes held now (busy conversations). */
  get size(): number {
    return this.#lanes.size;
  }

  /**
   * Settles a channel's turns: with `cancel`, drops its queued items and cancels its running
   * turns at once; otherwise lets them run up to `graceMs` first. Resolves when none runs,
   * or (see #settle) once `signal` aborts.
   */
  async settleChannel(channelId: string, graceMs: number, cancel: boolean, signal: AbortSignal): Promise<void> {
    const lanes = [...this.#lanes.values()].filter((l) => l.channelId === channelId);
    if (cancel)
      for (const lane of lanes) {
        this.#drop(lane, 'channel removed');
        this.#forgetIfIdle(lane);
      }
    await this.#settle(lanes, cancel ? 0 : graceMs, new CodedError('CHANNEL_STOPPING', 'channel stopped'), signal);
  }

  /**
   * Lets the lanes' running turns finish for `graceMs`, cancels the rest, and waits for
   * their final text until `signal` aborts. Then turns that honour their signal end within
   * moments; one whose call hangs is left behind (logged), so no wait here is unbounded.
   */
  async #settle(lanes: Lane[], graceMs: number, reason: CodedError, signal: AbortSignal): Promise<void> {
    const running = () => lanes.flatMap((l) => (l.running ? [l.running] : []));
    const ended = () => Promise.all(running().map((r) => r.done));
    if (graceMs > 0) await settleWithin(ended(), graceMs, signal);
    for (const r of running()) r.controller.abort(reason);
    if (await settleWithin(ended(), Infinity, signal)) return;
    if (await settleWithin(ended(), ABANDON_AFTER_MS)) return;
    this.#o.log.warn({ turns: running().map((r) => r.job.id) }, 'cancelled turns did not end; no longer waiting for them');
  }

  /**
   * Hands the matching lanes to another owner (cluster rebalancing): their queued items are
   * forgotten here without a state change (they stay in the shared inbox) and their running
   * turns get `graceMs` to finish before they are cancelled.
   */
  async release(match: (scope: string) => boolean, graceMs: number, signal: AbortSignal): Promise<void> {
    const lanes = [...this.#lanes.values()].filter((l) => match(l.scope));
    for (const lane of lanes) {
      const released = lane.queue.splice(0);
      this.#queued -= released.length;
      this.#o.lifecycle.released(released);
      lane.passive.length = 0;
    }
    await this.#settle(lanes, graceMs, new CodedError('CLUSTER_LEASE_LOST', 'handed to another instance'), signal);
  }

  /** Stops one turn by id: cancels it if running, drops it if queued. */
  stopTurn(id: string): 'cancelled' | 'dropped' | undefined {
    for (const lane of this.#lanes.values()) {
      if (lane.running?.job.id === id) {
        stopRunning(lane.running, 'stopped by the operator');
        return 'cancelled';
      }
      const i = lane.queue.findIndex((it) => String(it.id) === id);
      if (i >= 0) {
        const dropped = lane.queue.splice(i, 1);
        this.#queued--;
        this.#o.lifecycle.dropped(dropped, 'stopped by the operator');
        this.#forgetIfIdle(lane);
        return 'dropped';
      }
    }
    return undefined;
  }

  /** The inbox ids of every item queued or running here. */
  heldIds(): Set<number> {
    const ids = new Set<number>();
    for (const lane of this.#lanes.values()) for (const it of [...lane.queue, ...(lane.running?.job.items ?? [])]) ids.add(it.id);
    return ids;
  }

  snapshot(): { inFlight: number; queued: number; channels: Record<string, { inFlight: number; queued: number }> } {
    const channels: Record<string, { inFlight: number; queued: number }> = {};
    for (const lane of this.#lanes.values()) {
      const c = (channels[lane.channelId] ??= { inFlight: 0, queued: 0 });
      c.queued += lane.queue.length;
      if (lane.running) c.inFlight++;
    }
    return { inFlight: this.#inFlight, queued: this.#queued, channels };
  }

  /**
   * Upgrade (the old process): starts no turn from now on, what is queued stays pending in
   * the inbox for the new process; returns the scopes whose turns still run here.
   */
  freeze(): string[] {
    this.#draining = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    return [...this.#lanes.values()].filter((l) => l.running).map((l) => l.scope);
  }

  /** Lets running turns finish for `graceMs`, then cancels them; waits for their final text until `signal` aborts. */
  async drain(graceMs: number, signal: AbortSignal): Promise<void> {
    this.#draining = true;
    clearTimeout(this.#timer);
    this.#ready.length = 0;
    await this.#settle([...this.#lanes.values()], graceMs, new CodedError('DAEMON_SHUTTING_DOWN', 'shutting down'), signal);
  }
}
