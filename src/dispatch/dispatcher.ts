import { CodedError, errorMessage } from '../contracts/errors.js';
import type { ParsedCommand } from '../contracts/commands.js';
import { commandOf } from '../contracts/commands.js';
import { conversationScope, type ChannelMessage } from '../contracts/message.js';
import type { Admission, Incoming, StopOrder, StopResult, TopologyWork } from '../contracts/topology.js';
import type { InboxItem } from '../inbox/item.js';
import { ItemLifecycle } from '../inbox/lifecycle.js';
import { checkAccess, NoticeLimiter, PassiveContext } from './access.js';
import { AckReactions } from './ack.js';
import type { DispatchChannel } from './channel.js';
import { ChatControls } from './chat-controls.js';
import { IntakeHold } from './hold.js';
import { IntentJudge } from './intent-judge.js';
import { fullFiring, refuseFullFirings } from './firing-full.js';
import { Lanes, type TurnJob } from './lanes.js';
import { metricsObserver, trackerObserver } from './lifecycle-observers.js';
import type { DispatcherOptions } from './options.js';
import { resolveQueueMode } from './queue-mode.js';
import { TaskTracker } from './tracker.js';

export type { TurnJob };
export type { DispatchChannel };
export type { DispatchTopology, DispatcherOptions, ExecuteTurn } from './options.js';

export const BUSY_REPLY = 'I am busy right now, try again shortly.';
export { HELD_REPLY, NOT_KEPT_REPLY } from './hold.js';

/** A failure that means "the durable store cannot take it now": the message is held and retried. */
const holdable = (err: unknown): boolean => err instanceof CodedError && (err.code === 'STORAGE_UNAVAILABLE' || err.code === 'CLUSTER_UNAVAILABLE');

/**
 * From delivered message to running turn: access rules, the /stop fast path, the durable
 * inbox (the topology's intake), one FIFO lane per conversation scope, in-flight limits and
 * queue modes. It is the topology's work (TopologyWork): a cluster hands it the items of
 * the partitions this instance consumes, and the control requests for them.
 */
export class Dispatcher implements TopologyWork {
  readonly #o: DispatcherOptions;
  readonly #lanes: Lanes;
  readonly #lifecycle: ItemLifecycle;
  readonly #hardStop: AbortSignal;
  readonly #notices: NoticeLimiter;
  /** Messages the store (or the shared inbox) could not take yet, per channel. */
  readonly #hold: IntakeHold<Admission>;
  readonly #controls: ChatControls;
  readonly #judge: IntentJudge | undefined;
  readonly passive: PassiveContext;
  readonly tracker: TaskTracker;
  readonly #ack: AckReactions;
  #accepting = true;
  /** Upgrade (the new process): scopes whose stored items wait for resumeTurns, or all of them. */
  #deferred: ReadonlySet<string> | 'all' | undefined;
  /**
   * Upgrade: the items queued here since deferTurns, so the last resumeTurns also takes what
   * the old process stored after it froze (a webhook in flight) and nobody queued. Lives only
   * for the hand-over (at most shutdown_grace_ms of messages).
   */
  #upgradeSeen: Set<number> | undefined;
  /** Upgrade (the old process): the items queued since it began (trackAdmissions). */
  #admitted: Set<number> | undefined;

  constructor(options: DispatcherOptions) {
    this.#o = options;
    const { intake } = options.topology;
    this.tracker = options.tracker ?? new TaskTracker(() => 'default');
    this.#ack = new AckReactions(options.channel, options.log);
    this.#notices = new NoticeLimiter(undefined, undefined, (n) => options.metrics.evictions.inc({ structure: 'not_allowed_notices' }, n));
    this.passive = new PassiveContext(
      20,
      () => ({ maxConversations: options.limits().passive_max_conversations, maxBytes: options.limits().passive_max_bytes }),
      (n) => options.metrics.evictions.inc({ structure: 'passive_context' }, n),
    );
    this.#hardStop = options.hardStop ?? new AbortController().signal;
    const ackOff = (items: readonly InboxItem[]) => {
      for (const it of items) this.#ack.set(it.message, false);
    };
    this.#lifecycle = new ItemLifecycle(intake, [
      trackerObserver(this.tracker),
      metricsObserver(options.metrics),
      { finished: ackOff, dropped: ackOff },
      ...(options.observers ?? []),
    ]);
    this.#hold = new IntakeHold<Admission>({
      limits: () => ({ messages: options.limits().degraded_hold_messages, bytes: options.limits().degraded_hold_bytes }),
      write: async (batch) => refuseFullFirings(batch, await intake.receiveBatch(batch)),
      stored: (h, admission) => this.#admit(h.msg, admission, h.passive),
      holdable,
      syntheticWindowMs: () => intake.duplicateWindowMs(),
      notify: (msg, text) => void this.#notify(msg, text),
      counted: (channelId, held) => options.metrics.held.set({ channel: channelId }, held),
      log: options.log,
    });
    this.#lanes = new Lanes({
      limits: options.limits,
      channelLimit: (id) => options.channel(id)?.config.max_in_flight,
      ...(options.agentOf ? { agentLimit: options.agentOf } : {}),
      execute: options.execute,
      lifecycle: this.#lifecycle,
      log: options.log,
    });
    this.#controls = new ChatControls({
      routing: options.topology.controls,
      lanes: this.#lanes,
      log: options.log,
      notify: (msg, text) => this.#notify(msg, text),
    });
    this.#judge =
      options.classify &&
      new IntentJudge({
        classify: options.classify,
        passive: this.passive,
        metrics: options.metrics,
        log: options.log,
        accepting: () => this.#accepting,
        deliver: (msg) => this.deliver(msg),
      });
  }

  /** The Deliver contract: resolves after the message is committed (or deliberately not stored). */
  deliver = async (msg: ChannelMessage): Promise<boolean> => {
    const ch = this.#o.channel(msg.channelId);
    if (!ch) throw new CodedError('CHANNEL_UNKNOWN', `channel "${msg.channelId}" is not taking messages: the dispatcher does not know it`);
    if (!this.#accepting) throw new CodedError('DAEMON_SHUTTING_DOWN', `channel "${msg.channelId}" is not taking messages`, { retryable: true });
    const scope = conversationScope(msg, ch.config.scope);
    const verdict = checkAccess(msg, ch.config, ch.adapter.selfId);
    // Per message: the fields are built only when the line is written.
    if (this.#o.log.isLevelEnabled('debug')) this.#o.log.debug({ channel: msg.channelId, messageId: msg.messageId, scope, verdict }, 'message received');
    if (verdict !== 'self' && !this.#judge?.judged(msg)) this.#o.onReceived?.(msg, verdict === 'ok' ? 'accepted' : verdict);
    if (verdict === 'self' || verdict === 'bot') {
      this.#o.metrics.dropped.inc({ channel: msg.channelId, reason: verdict });
      return false;
    }
    if (verdict === 'ignored') {
      this.#o.metrics.refused.inc({ channel: msg.channelId, reason: 'not_allowed' });
      return false;
    }
    if (verdict === 'not_allowed') {
      this.#o.metrics.refused.inc({ channel: msg.channelId, reason: 'not_allowed' });
      if (this.#notices.take(`${msg.channelId}:${msg.sender.id}`)) {
        await this.#notify(msg, `You are not allowed to talk to this bot. Your id is ${msg.sender.id}; ask the operator to add it to allow_from.`);
      }
      return false;
    }
    const command = commandOf(msg, ch.adapter.selfName);
    if (verdict === 'unaddressed') {
      // A bare "/stop" in a group from someone whose turn runs here (or, in a cluster, on the
      // conversation's owner) is for us: it stops that turn and is not kept as context.
      if (command?.name === 'stop') {
        if (this.#lanes.hasTurnOf(scope, msg.sender.id)) return this.#controls.stop(msg, scope, command.args, ch.config.admins);
        if (await this.#controls.stopBare(msg, scope)) return true;
      }
      this.passive.add(scope, msg);
      if (ch.config.reply_intent === 'classifier') void this.#judge?.judge(msg, scope);
      return false;
    }
    // "/stop@otherbot" is for another bot in the group and does not parse as ours.
    const control = command && this.#o.control?.(msg, scope, command);
    if (control) return this.#controls.control(msg, scope, command, control);
    if (command?.name === 'stop') return this.#controls.stop(msg, scope, command.args, ch.config.admins);
    const incoming: Incoming = { msg, scope, passive: this.passive.take(scope) };
    // While the channel holds messages a new one joins them, so no conversation's order changes.
    if (this.#hold.holding(msg.channelId) || !this.#o.topology.intake.writable) return this.#held(incoming, 'storage is degraded');
    let admission: Admission;
    try {
      admission = await this.#o.topology.intake.receive(incoming);
    } catch (err) {
      if (holdable(err)) return this.#held(incoming, errorMessage(err));
      throw err;
    }
    const full = fullFiring(msg, admission);
    if (full) {
      this.#o.metrics.refused.inc({ channel: msg.channelId, reason: 'busy' });
      throw full;
    }
    this.#admit(msg, admission, incoming.passive);
    return true;
  };

  /**
   * Holds a message the durable store refused: the deliver call resolves once it is stored
   * (the platform is acknowledged only then); past the hold's bound it is refused and rejects.
   */
  #held({ msg, scope, passive }: Incoming, why: string): Promise<boolean> {
    return this.#hold.hold(msg, scope, passive, why).catch((err: unknown) => {
      if (holdable(err)) this.#o.metrics.refused.inc({ channel: msg.channelId, reason: 'storage' });
      throw err;
    });
  }

  /** A stored message: counted, and queued for its turn when it runs here. */
  #admit(msg: ChannelMessage, admission: Admission, passive: ChannelMessage[]): void {
    const channel = msg.channelId;
    if (admission === 'duplicate') {
      this.#o.metrics.duplicates.inc({ channel });
      return;
    }
    if (admission === 'full') {
      this.#o.metrics.refused.inc({ channel, reason: 'busy' });
      void this.#notify(msg, BUSY_REPLY);
      return;
    }
    this.#o.metrics.received.inc({ channel });
    // Stored elsewhere (it runs where its conversation is served), or stored while shutting
    // down (the hold's last write): it stays pending for whoever takes it up.
    if (admission === 'stored' || !this.#accepting) return;
    // Upgrade: stored (the platform is acknowledged), queued once the old process lets go.
    if (this.#deferred === 'all' || this.#deferred?.has(admission.run.scope)) return;
    if (this.#enqueue(admission.run, passive)) this.#ack.set(msg, true);
  }

  /**
   * Runs a control command on this instance, for one received by another instance (cluster
   * mode: the turn it acts on runs here). Undefined when the command is not a control.
   */
  runControl(msg: ChannelMessage, scope: string, cmd: ParsedCommand): Promise<string | undefined> | undefined {
    return this.#o.control?.(msg, scope, cmd)?.();
  }

  /** Queues an item that is already stored (the cluster's partition consumer hands them in here). */
  enqueue(item: InboxItem, passive: ChannelMessage[]): void {
    this.#enqueue(item, passive);
  }

  hold(scope: string): () => void {
    return this.#lanes.hold(scope);
  }

  knows(channelId: string): boolean {
    return this.#o.channel(channelId) !== undefined;
  }

  /**
   * Cluster rebalancing: forget the matching scopes' queued items, let their running turns
   * finish up to `graceMs`; waits no longer than `signal` (and hardStop) allow.
   */
  release(match: (scope: string) => boolean, graceMs: number, signal?: AbortSignal): Promise<void> {
    return this.#lanes.release(match, graceMs, this.#bound(signal));
  }

  /** The signal bounding a wait: the caller's, if any, and hardStop. */
  #bound(signal: AbortSignal | undefined): AbortSignal {
    return signal ? AbortSignal.any([this.#hardStop, signal]) : this.#hardStop;
  }

  /** Queues an item; false when it was refused (queue full). */
  #enqueue(item: InboxItem, passive: ChannelMessage[]): boolean {
    this.#upgradeSeen?.add(item.id);
    this.#admitted?.add(item.id);
    const channelId = item.message.channelId;
    const mode = resolveQueueMode(this.#o.queueModeOf?.(item.scope, channelId), this.#o.channel(channelId)?.config, this.#o.limits());
    if (this.#lanes.accept(item, mode, passive)) return true;
    this.#lifecycle.refused(item, 'queue full');
    void this.#notify(item.message, BUSY_REPLY);
    return false;
  }

  async #notify(msg: ChannelMessage, text: string): Promise<void> {
    try {
      await this.#o.notify(msg, text);
    } catch (err) {
      this.#o.log.warn({ err, channel: msg.channelId }, 'control reply failed');
    }
  }

  /** Re-dispatches what the topology recovers (a crash's unfinished items; their draft is reused). */
  recover(): number {
    if (this.#deferred === 'all') return 0;
    const items = this.#o.topology.recover();
    this.#requeue(items);
    if (items.length) this.#o.log.info({ count: items.length }, 'recovered unfinished messages from the inbox');
    return items.length;
  }

  /**
   * Queues items found in the inbox again. In a scope with items that ran before (reply refs),
   * all are queued before its turn starts, so a collected turn's items start again as one
   * (Lanes). Per scope only: all scopes' at once would count against max_queued, none started.
   */
  #requeue(items: readonly InboxItem[]): void {
    const byScope = new Map<string, InboxItem[]>();
    for (const item of items) {
      const scoped = byScope.get(item.scope);
      if (scoped) scoped.push(item);
      else byScope.set(item.scope, [item]);
    }
    for (const scoped of byScope.values()) {
      const queue = () => {
        for (const item of scoped) this.#enqueue(item, []);
      };
      if (scoped.some((i) => i.replyRefs.length > 0)) this.#lanes.together(queue);
      else queue();
    }
  }

  /** Upgrade (the old process): from now on remembers the items it queues, which a failed upgrade's recovery leaves alone. */
  trackAdmissions(): void {
    this.#admitted = new Set();
  }

  /**
   * Upgrade (the old process) that failed: queues what the new process stored before it was
   * stopped (it started no turn): the unfinished items nothing here holds or queued since the
   * upgrade began. Nothing while this process is itself mid-hand-over or stopping.
   */
  recoverUnheld(): number {
    const admitted = this.#admitted;
    this.#admitted = undefined;
    if (!this.#accepting || this.#deferred !== undefined) return 0;
    const held = this.#lanes.heldIds();
    const items = this.#o.topology.recover().filter((i) => !held.has(i.id) && !admitted?.has(i.id));
    this.#requeue(items);
    return items.length;
  }

  /**
   * Upgrade (the new process, single node): messages are stored but no turn starts until
   * the old process stopped starting turns (resumeTurns), so no item runs in both.
   */
  deferTurns(): void {
    this.#deferred = 'all';
    this.#upgradeSeen = new Set();
  }

  /**
   * Upgrade: queues what waits in the inbox for the scopes deferred so far, and what nobody
   * queued here, except in `waiting` scopes (their turns still run in the old process),
   * which stay deferred until the next call. `final` (the old process has stopped): the
   * hand-over is over. Returns how many items it queued.
   */
  resumeTurns(waiting: ReadonlySet<string> = new Set(), final = false): number {
    const before = this.#deferred;
    const seen = this.#upgradeSeen;
    if (!seen) return 0;
    this.#deferred = waiting.size ? waiting : undefined;
    const deferred = (scope: string) => before === 'all' || (before?.has(scope) ?? false);
    const items = this.#o.topology.recover().filter((i) => !waiting.has(i.scope) && (deferred(i.scope) || !seen.has(i.id)));
    this.#requeue(items);
    if (final) this.#upgradeSeen = undefined;
    return items.length;
  }

  /**
   * Upgrade (the old process): stops taking messages and starting turns at once (shutdown
   * follows); returns the scopes whose turns still run here.
   */
  freeze(): string[] {
    this.#accepting = false;
    return this.#lanes.freeze();
  }

  /** A chat /stop from another instance: ends what `order` names, as the sender's own /stop would here. */
  stop(scope: string, order: StopOrder, reason: string): StopResult {
    return this.#lanes.stopOf(scope, order.senderId, reason, order.runningOfAnyone);
  }

  /**
   * Before a channel's listener stops: a removed channel's turns are cancelled (stop marker)
   * and its queue dropped; a changed channel's running turns get `graceMs` to finish.
   */
  settleChannel(channelId: string, graceMs: number, removed: boolean, signal?: AbortSignal): Promise<void> {
    this.#hold.release(channelId, removed);
    return this.#lanes.settleChannel(channelId, graceMs, removed, this.#bound(signal));
  }

  /** Stops one turn by its tracker id (operator action). */
  stopTurn(id: string): 'cancelled' | 'dropped' | undefined {
    return this.#lanes.stopTurn(id);
  }

  snapshot() {
    return this.#lanes.snapshot();
  }

  /** What this instance runs now (the cluster heartbeat tells the others). */
  load(): { inFlight: number; queued: number } {
    const { inFlight, queued } = this.#lanes.snapshot();
    return { inFlight, queued };
  }

  /** Messages held in memory for `channelId` while the store cannot take them. */
  held(channelId: string): number {
    return this.#hold.count(channelId);
  }

  /** What the in-memory structures keyed by user input hold now. */
  memory(): { lanes: number; passive: { conversations: number; bytes: number } } {
    return { lanes: this.#lanes.size, passive: this.passive.size };
  }

  /**
   * Stops taking messages; running turns get `graceMs` to finish, then are cancelled and
   * waited for until `signal` or hardStop aborts. Queued items stay pending.
   */
  async shutdown(graceMs: number, signal?: AbortSignal): Promise<void> {
    this.#accepting = false;
    this.#judge?.close();
    await this.#hold.close();
    await this.#lanes.drain(graceMs, this.#bound(signal));
  }
}
