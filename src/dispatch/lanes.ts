import type { DaemonConfig, QueueMode } from '../config/schema.js';
import type { Logger } from '../observe/logger.js';
import type { Metrics } from '../observe/metrics.js';
import type { InboxItem, InboxWrites } from '../store/inbox.js';
import type { ChannelMessage } from '../contracts/message.js';
import type { TaskTracker } from './tracker.js';
import { settleWithin } from '../util/abortable.js';

/** One turn to run: one inbox item, or several merged by `collect`. */
export interface TurnJob {
  /** The turn's id in the task tracker: its first inbox item. */
  id: string;
  scope: string;
  items: InboxItem[];
  /** The text the agent answers: one message's, or the collected ones joined. */
  text: string;
  passive: ChannelMessage[];
}

export interface Lane {
  scope: string;
  channelId: string;
  queue: InboxItem[];
  passive: ChannelMessage[];
  running?: { job: TurnJob; controller: AbortController; done: Promise<void> };
  mode: QueueMode;
  /** collect: merging waits this long after the newest arrival. */
  notBeforeMs: number;
}

interface LanesOptions {
  limits(): DaemonConfig['limits'];
  channelLimit(channelId: string): number | undefined;
  /** The agent a channel is bound to, and that agent's max_in_flight. */
  agentLimit?(channelId: string): { agent: string; max: number | undefined };
  execute(job: TurnJob, signal: AbortSignal): Promise<'done' | 'error' | 'cancelled'>;
  inbox: InboxWrites;
  metrics: Metrics;
  log: Logger;
  tracker: TaskTracker;
  /** Items leave the lanes: their turn ended, or they were dropped. */
  settled?(items: readonly InboxItem[]): void;
}

/**
 * One FIFO lane per conversation scope, at most one running turn per lane, and the
 * global and per-channel in-flight limits across lanes. Lanes wait their turn in arrival
 * order.
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

  constructor(options: LanesOptions) {
    this.#o = options;
  }

  /** Queues an item; false when `max_queued` is reached (the caller refuses it). */
  accept(item: InboxItem, mode: QueueMode, passive: ChannelMessage[]): boolean {
    // Checked before a lane exists: a refused message from a new conversation leaves nothing behind.
    if (this.#queued >= this.#o.limits().max_queued) return false;
    const lane = this.#lanes.get(item.scope) ?? this.#newLane(item);
    lane.mode = mode;
    lane.passive.push(...passive);
    if (lane.running && mode === 'interrupt') {
      // The newest message replaces what was waiting and what is running.
      this.#drop(lane, 'superseded by a newer message');
      lane.running.controller.abort(new Error('interrupted by a newer message'));
    }
    lane.queue.push(item);
    this.#o.tracker.queued(String(item.id), lane.channelId, lane.scope);
    this.#queued++;
    this.#o.metrics.queued.set(this.#queued);
    if (mode === 'collect' && lane.running) lane.notBeforeMs = Date.now() + this.#o.limits().collect_debounce_ms;
    if (!lane.running && !this.#ready.includes(lane.scope)) this.#ready.push(lane.scope);
    this.#pump();
    return true;
  }

  #newLane(item: InboxItem): Lane {
    const lane: Lane = { scope: item.scope, channelId: item.message.channelId, queue: [], passive: [], mode: 'followup', notBeforeMs: 0 };
    this.#lanes.set(item.scope, lane);
    return lane;
  }

  #drop(lane: Lane, reason: string): number {
    const n = lane.queue.length;
    const dropped = lane.queue.splice(0);
    for (const it of dropped) {
      this.#o.inbox.setState(it.id, 'failed', reason);
      this.#o.tracker.finished(String(it.id));
    }
    if (n) this.#o.settled?.(dropped);
    this.#queued -= n;
    this.#o.metrics.queued.set(this.#queued);
    return n;
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
    if (this.#draining) return;
    let wakeAt = Infinity;
    for (let i = 0; i < this.#ready.length; ) {
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
      if (!this.#canStart(lane)) {
        i++;
        continue;
      }
      this.#ready.splice(i, 1);
      this.#start(lane);
    }
    if (wakeAt !== Infinity) this.#timer = setTimeout(() => this.#pump(), Math.max(0, wakeAt - Date.now()));
  }

  #start(lane: Lane): void {
    const items = lane.mode === 'collect' ? lane.queue.splice(0) : [lane.queue.shift()!];
    this.#queued -= items.length;
    const id = String(items[0]!.id);
    for (const it of items.slice(1)) this.#o.tracker.finished(String(it.id));
    this.#o.tracker.started(id);
    const job: TurnJob = { id, scope: lane.scope, items, text: items.map((i) => i.message.text).join('\n\n'), passive: lane.passive.splice(0) };
    const controller = new AbortController();
    this.#inFlight++;
    this.#perChannel.set(lane.channelId, (this.#perChannel.get(lane.channelId) ?? 0) + 1);
    const agent = this.#o.agentLimit?.(lane.channelId).agent;
    if (agent !== undefined) this.#perAgent.set(agent, (this.#perAgent.get(agent) ?? 0) + 1);
    this.#o.metrics.queued.set(this.#queued);
    this.#o.metrics.inFlight.set(this.#inFlight);
    // An item turns "running" in the inbox with its first reply (Inbox.setReplyRefs): one
    // commit fewer per turn, and recovery treats pending and running items alike anyway.
    const done = this.#o
      .execute(job, controller.signal)
      .then((ending) => {
        const state = ending === 'done' ? 'done' : 'failed';
        for (const it of items) this.#o.inbox.setState(it.id, state, ending === 'done' ? undefined : ending);
      })
      .catch((err) => {
        this.#o.log.error({ err, scope: lane.scope }, 'turn failed outside the runtime');
        for (const it of items) this.#o.inbox.setState(it.id, 'failed', String(err));
      })
      .finally(() => {
        this.#o.tracker.finished(id);
        this.#o.settled?.(items);
        lane.running = undefined;
        this.#inFlight--;
        this.#perChannel.set(lane.channelId, (this.#perChannel.get(lane.channelId) ?? 1) - 1);
        if (agent !== undefined) this.#perAgent.set(agent, (this.#perAgent.get(agent) ?? 1) - 1);
        this.#o.metrics.inFlight.set(this.#inFlight);
        if (lane.queue.length) this.#ready.push(lane.scope);
        else this.#forgetIfIdle(lane);
        this.#pump();
      });
    lane.running = { job, controller, done };
  }

  stop(scope: string, reason: string): boolean {
    const r = this.stopOf(scope, undefined, reason);
    return r.cancelled || r.dropped > 0;
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
      const keep: InboxItem[] = [];
      const gone: InboxItem[] = [];
      for (const it of lane.queue) {
        if (!mine(it)) {
          keep.push(it);
          continue;
        }
        this.#o.inbox.setState(it.id, 'failed', reason);
        this.#o.tracker.finished(String(it.id));
        gone.push(it);
      }
      dropped = gone.length;
      if (dropped) this.#o.settled?.(gone);
      lane.queue = keep;
      this.#queued -= dropped;
      this.#o.metrics.queued.set(this.#queued);
    }
    const running = lane.running;
    const cancel = running !== undefined && (runningOfAnyone || running.job.items.some(mine));
    if (cancel) running.controller.abort(new Error(reason));
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
   * turns at once; otherwise lets them run up to `graceMs` first. Resolves when none runs.
   */
  async settleChannel(channelId: string, graceMs: number, cancel: boolean): Promise<void> {
    const lanes = [...this.#lanes.values()].filter((l) => l.channelId === channelId);
    if (cancel)
      for (const lane of lanes) {
        this.#drop(lane, 'channel removed');
        this.#forgetIfIdle(lane);
      }
    await this.#settle(lanes, cancel ? 0 : graceMs, 'channel stopped');
  }

  /** Lets the lanes' running turns finish for `graceMs`, cancels the rest, and waits for their final text. */
  async #settle(lanes: Lane[], graceMs: number, reason: string): Promise<void> {
    const running = () => lanes.flatMap((l) => (l.running ? [l.running] : []));
    if (graceMs > 0) await settleWithin(Promise.all(running().map((r) => r.done)), graceMs);
    for (const r of running()) r.controller.abort(new Error(reason));
    await Promise.all(running().map((r) => r.done));
  }

  /**
   * Hands the matching lanes to another owner (cluster rebalancing): their queued items are
   * forgotten here without a state change (they stay in the shared inbox) and their running
   * turns get `graceMs` to finish before they are cancelled.
   */
  async release(match: (scope: string) => boolean, graceMs: number): Promise<void> {
    const lanes = [...this.#lanes.values()].filter((l) => match(l.scope));
    for (const lane of lanes) {
      for (const it of lane.queue.splice(0)) {
        this.#queued--;
        this.#o.tracker.finished(String(it.id));
      }
      lane.passive.length = 0;
    }
    this.#o.metrics.queued.set(this.#queued);
    await this.#settle(lanes, graceMs, 'handed to another instance');
  }

  /** Stops one turn by id: cancels it if running, drops it if queued. */
  stopTurn(id: string): 'cancelled' | 'dropped' | undefined {
    for (const lane of this.#lanes.values()) {
      if (lane.running?.job.id === id) {
        lane.running.controller.abort(new Error('stopped by the operator'));
        return 'cancelled';
      }
      const i = lane.queue.findIndex((it) => String(it.id) === id);
      if (i >= 0) {
        const [it] = lane.queue.splice(i, 1);
        this.#queued--;
        this.#o.metrics.queued.set(this.#queued);
        this.#o.inbox.setState(it!.id, 'failed', 'stopped by the operator');
        this.#o.tracker.finished(id);
        this.#o.settled?.([it!]);
        this.#forgetIfIdle(lane);
        return 'dropped';
      }
    }
    return undefined;
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

  /** Lets running turns finish for `graceMs`, then cancels them; waits for their final text. */
  async drain(graceMs: number): Promise<void> {
    this.#draining = true;
    clearTimeout(this.#timer);
    this.#ready.length = 0;
    await this.#settle([...this.#lanes.values()], graceMs, 'shutting down');
  }
}
