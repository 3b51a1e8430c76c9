import type { DaemonConfig, QueueMode } from '../config/schema.js';
import type { Logger } from '../observe/logger.js';
import type { Metrics } from '../observe/metrics.js';
import { CodedError, errorMessage } from '../contracts/errors.js';
import type { InboxItem } from '../inbox/item.js';
import { ItemLifecycle, LocalIntake, type ItemStore, type LocalItemStore, type TurnEnding } from '../inbox/lifecycle.js';
import { parseCommand, type ParsedCommand } from '../contracts/commands.js';
import { INTENT_CONTEXT_MESSAGES } from '../agent/intent.js';
import { checkAccess, IntentLimiter, NoticeLimiter, PassiveContext } from './access.js';
import { conversationScope, type ChannelMessage } from '../contracts/message.js';
import { Lanes, type TurnJob } from './lanes.js';
import { TaskTracker } from './tracker.js';
import { AckReactions } from './ack.js';
import type { DispatchChannel } from './channel.js';
import { metricsObserver, trackerObserver } from './lifecycle-observers.js';
import { IntakeHold, type Held } from './hold.js';

export type { TurnJob };

export type { DispatchChannel };

/** Runs one turn to its final text; resolves with how it ended. */
export type ExecuteTurn = (job: TurnJob, signal: AbortSignal) => Promise<TurnEnding>;

/**
 * Cluster mode (src/cluster): the shared inbox. A message is published to it instead of
 * the local SQLite inbox and runs on whichever instance consumes its partition, which
 * hands it back through `Dispatcher.enqueue`; `/stop` reaches every instance.
 */
export interface RemoteInbox extends ItemStore {
  readonly remote: true;
  /** Resolves once the message (with the context it carries) is durably stored. */
  publish(msg: ChannelMessage, scope: string, passive: ChannelMessage[]): Promise<'stored' | 'duplicate' | 'full'>;
  /** Stops the scope's turn and queue wherever they run. */
  stop(msg: ChannelMessage, scope: string): Promise<'stopped' | 'nothing' | 'duplicate'>;
  /**
   * Runs a control command (`/approve`, `/deny`, `/stop tool`) on the instance that runs
   * the turn it acts on, which calls `Dispatcher.runControl` there; `here` runs it on this
   * instance when no instance runs that turn now. Resolves with the reply for the sender.
   */
  control(msg: ChannelMessage, scope: string, cmd: ParsedCommand, here: () => Promise<string | undefined>): Promise<string | undefined | 'duplicate'>;
}

export interface DispatcherOptions {
  /** The SQLite inbox (src/store/inbox.ts), or the cluster's shared one. */
  inbox: LocalItemStore | RemoteInbox;
  metrics: Metrics;
  log: Logger;
  limits(): DaemonConfig['limits'];
  channel(id: string): DispatchChannel | undefined;
  execute: ExecuteTurn;
  /** Sends a short control reply (Stopped., busy, not allowed) outside any turn. */
  notify(msg: ChannelMessage, text: string): Promise<void>;
  /** A conversation's /queue choice, if any. */
  queueModeOf?(scope: string): QueueMode | undefined;
  /** The agent a channel is bound to, for per-agent limits. */
  agentOf?(channelId: string): { agent: string; max: number | undefined };
  /** Every running and queued turn; a private one when not given. */
  tracker?: TaskTracker;
  /**
   * Aborted when the daemon must exit now: waits for running turns (shutdown, a channel
   * settling, a cluster hand-over) stop waiting, so a call that hangs cannot hold them.
   */
  hardStop?: AbortSignal;
  /**
   * Commands that act on a running turn and so cannot wait in its lane (`/approve`,
   * `/deny`, `/stop tool`): returns the action for a command it handles, undefined otherwise.
   * The action's text, if any, is sent back as a control reply.
   */
  control?(msg: ChannelMessage, scope: string, cmd: ParsedCommand): (() => Promise<string | undefined>) | undefined;
  /**
   * reply_intent = "classifier": judges an unaddressed group message, given the group's
   * recent messages (newest last). Resolves "ignore" on any failure; records its own metrics.
   */
  classify?(msg: ChannelMessage, recent: readonly ChannelMessage[], signal: AbortSignal): Promise<'reply' | 'ignore'>;
  /**
   * Told about every message a channel delivers except the bot's own, addressed or not, with
   * what access rules made of it (the message_received hooks). Must return at once.
   */
  onReceived?(msg: ChannelMessage, verdict: 'accepted' | 'unaddressed' | 'not_allowed' | 'ignored' | 'bot'): void;
}

export const BUSY_REPLY = 'I am busy right now, try again shortly.';
export { HELD_REPLY, NOT_KEPT_REPLY } from './hold.js';

/** What taking a message in came to: stored in the local inbox (undefined: a redelivery), or published to the shared one. */
type Admission = { item: InboxItem | undefined } | { published: 'stored' | 'duplicate' | 'full' };

/** A failure that means "the durable store cannot take it now": the message is held and retried. */
const holdable = (err: unknown): boolean => err instanceof CodedError && (err.code === 'STORAGE_UNAVAILABLE' || err.code === 'CLUSTER_UNAVAILABLE');

/**
 * From delivered message to running turn: access rules, the /stop fast path, the durable
 * inbox, one FIFO lane per conversation scope, in-flight limits and queue modes.
 */
export class Dispatcher {
  /** Messages the classifier chose to answer, delivered again as addressed: not new to observers. */
  readonly #judged = new WeakSet<ChannelMessage>();
  readonly #o: DispatcherOptions;
  readonly #lanes: Lanes;
  readonly #lifecycle: ItemLifecycle;
  /** Where new messages go: the local SQLite inbox (through the lifecycle), or the cluster's shared inbox. */
  readonly #entry: { local: LocalIntake; remote?: never } | { remote: RemoteInbox; local?: never };
  readonly #hardStop: AbortSignal;
  readonly #notices: NoticeLimiter;
  /** Messages the store (or the shared inbox) could not take yet, per channel. */
  readonly #hold: IntakeHold<Admission>;
  readonly passive: PassiveContext;
  readonly tracker: TaskTracker;
  readonly #ack: AckReactions;
  readonly #intents = new IntentLimiter();
  /** Aborted at shutdown: classifier calls still running stop. */
  readonly #closing = new AbortController();
  #accepting = true;

  constructor(options: DispatcherOptions) {
    this.#o = options;
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
    this.#lifecycle = new ItemLifecycle(options.inbox, [
      trackerObserver(this.tracker),
      metricsObserver(options.metrics),
      { finished: ackOff, dropped: ackOff },
    ]);
    this.#entry = 'remote' in options.inbox ? { remote: options.inbox } : { local: new LocalIntake(options.inbox) };
    this.#hold = new IntakeHold<Admission>({
      limits: () => ({ messages: options.limits().degraded_hold_messages, bytes: options.limits().degraded_hold_bytes }),
      write: (batch) => this.#writeHeld(batch),
      stored: (h, admission) => this.#admit(h.msg, admission, h.passive),
      holdable,
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
    if (verdict !== 'self' && !this.#judged.has(msg)) this.#o.onReceived?.(msg, verdict === 'ok' ? 'accepted' : verdict);
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
    const command = parseCommand(msg.text, ch.adapter.selfName);
    if (verdict === 'unaddressed') {
      // A bare "/stop" in a group from someone whose turn runs here is for us: it stops that
      // turn and is not kept as context for the model.
      if (command?.name === 'stop' && this.#lanes.hasTurnOf(scope, msg.sender.id)) return this.#stop(msg, scope, command.args, ch.config.admins);
      this.passive.add(scope, msg);
      if (ch.config.reply_intent === 'classifier' && this.#o.classify) void this.#judge(msg, scope);
      return false;
    }
    // "/stop@otherbot" is for another bot in the group and does not parse as ours.
    const control = command && this.#o.control?.(msg, scope, command);
    if (control) return this.#control(msg, scope, command, control);
    if (command?.name === 'stop') return this.#stop(msg, scope, command.args, ch.config.admins);
    const { local, remote } = this.#entry;
    const passive = this.passive.take(scope);
    // While the channel holds messages a new one joins them, so no conversation's order changes.
    if (this.#hold.holding(msg.channelId) || (local && !local.writable)) return this.#held(msg, scope, passive, 'storage is degraded');
    let admission: Admission;
    try {
      admission = local ? { item: await local.tryReceive(msg, scope) } : { published: await remote.publish(msg, scope, passive) };
    } catch (err) {
      if (holdable(err)) return this.#held(msg, scope, passive, errorMessage(err));
      throw err;
    }
    this.#admit(msg, admission, passive);
    return true;
  };

  /**
   * Holds a message the durable store refused: the deliver call resolves once it is stored
   * (the platform is acknowledged only then); past the hold's bound it is refused and rejects.
   */
  #held(msg: ChannelMessage, scope: string, passive: ChannelMessage[], why: string): Promise<boolean> {
    return this.#hold.hold(msg, scope, passive, why).catch((err: unknown) => {
      if (holdable(err)) this.#o.metrics.refused.inc({ channel: msg.channelId, reason: 'storage' });
      throw err;
    });
  }

  /**
   * Writes held messages in order: the local inbox takes the batch in one transaction; the
   * shared inbox one at a time, stopping at the first it refuses (so none overtakes another).
   */
  async #writeHeld(batch: readonly Held[]): Promise<Array<PromiseSettledResult<Admission>>> {
    const { local, remote } = this.#entry;
    if (local) return Promise.allSettled(batch.map(async (h) => ({ item: await local.tryReceive(h.msg, h.scope) })));
    const out: Array<PromiseSettledResult<Admission>> = [];
    for (const h of batch) {
      try {
        out.push({ status: 'fulfilled', value: { published: await remote.publish(h.msg, h.scope, h.passive) } });
      } catch (err) {
        out.push({ status: 'rejected', reason: err });
        if (holdable(err)) break;
      }
    }
    return out;
  }

  /** A stored message: counted, and (local inbox) queued for its turn. */
  #admit(msg: ChannelMessage, admission: Admission, passive: ChannelMessage[]): void {
    const channel = msg.channelId;
    if ('published' in admission) {
      if (admission.published === 'duplicate') this.#o.metrics.duplicates.inc({ channel });
      else if (admission.published === 'full') {
        this.#o.metrics.refused.inc({ channel, reason: 'busy' });
        void this.#notify(msg, BUSY_REPLY);
      } else this.#o.metrics.received.inc({ channel });
      return;
    }
    if (admission.item === undefined) {
      this.#o.metrics.duplicates.inc({ channel });
      return;
    }
    this.#o.metrics.received.inc({ channel });
    // Stored while shutting down (the hold's last write): it stays pending for the next start.
    if (!this.#accepting) return;
    if (this.#enqueue(admission.item, passive)) this.#ack.set(msg, true);
  }

  /**
   * Asks the classifier about an unaddressed group message (rate-limited per group); on
   * "reply" the message is taken out of the context and delivered as addressed. Runs after
   * the platform was acknowledged: the message was not stored, as any unaddressed one.
   */
  async #judge(msg: ChannelMessage, scope: string): Promise<void> {
    if (!this.#intents.take(`${msg.channelId}:${msg.chat.id}`)) {
      this.#o.metrics.intentCalls.inc({ channel: msg.channelId, decision: 'rate_limited' });
      return;
    }
    try {
      // The newest message (this one, kept as context until judged) and the ones before it.
      const recent = this.passive.peek(scope).slice(-(INTENT_CONTEXT_MESSAGES + 1));
      const decision = await this.#o.classify!(msg, recent, this.#closing.signal);
      if (decision !== 'reply' || !this.#accepting) return;
      this.passive.remove(scope, msg.messageId);
      const addressed = { ...msg, addressed: true };
      // Observers saw it when it came in; this is the same message taken up, not a new one.
      this.#judged.add(addressed);
      await this.deliver(addressed);
    } catch (err) {
      this.#o.log.warn({ err, channel: msg.channelId }, 'a message the classifier chose to answer could not be taken');
    }
  }

  /**
   * /stop stops what the sender started: their running turn and their queued messages. The
   * channel's `admins` stop the running turn whoever started it, and `/stop all` (admins)
   * also drops everyone's queued messages. A cancelled turn shows its partial text with the
   * stop marker (or the marker alone): that is the one visible result, so the short reply
   * goes out only when no running turn was stopped.
   */
  async #stop(msg: ChannelMessage, scope: string, args: string, admins: readonly string[]): Promise<boolean> {
    const { local, remote } = this.#entry;
    if (remote) {
      const result = await remote.stop(msg, scope);
      if (result !== 'duplicate') await this.#notify(msg, result === 'stopped' ? 'Stopped.' : 'Nothing to stop.');
      return true;
    }
    // Stored as done so a redelivered /stop is recognised and not acted on twice. While the
    // store refuses writes it stops at once without waiting (a redelivery stops nothing again).
    if (!(await local.recordCommand(msg, scope, false))) return true;
    const admin = msg.chat.type === 'dm' || admins.includes(msg.sender.id);
    const all = args.toLowerCase() === 'all';
    if (all && !admin) {
      await this.#notify(msg, "Only the channel's admins can stop everyone's answers; /stop stops yours.");
      return true;
    }
    const { cancelled, dropped } = this.#lanes.stopOf(scope, all || msg.chat.type === 'dm' ? undefined : msg.sender.id, 'stopped by /stop', admin);
    if (!cancelled) await this.#notify(msg, dropped > 0 ? 'Stopped.' : 'Nothing to stop.');
    return true;
  }

  async #control(msg: ChannelMessage, scope: string, cmd: ParsedCommand, action: () => Promise<string | undefined>): Promise<boolean> {
    const { local, remote } = this.#entry;
    // Stored as done, like /stop, so a redelivery is recognised and not acted on twice (in
    // cluster mode the shared inbox recognises it the way it does a /stop).
    if (local && !(await local.recordCommand(msg, scope, true))) return true;
    let reply: string | undefined;
    try {
      // In cluster mode the turn may run on another instance: the command goes there.
      const routed = remote ? await remote.control(msg, scope, cmd, action) : await action();
      if (routed === 'duplicate') return true;
      reply = routed;
    } catch (err) {
      this.#o.log.warn({ err, channel: msg.channelId }, 'control command failed');
      reply = 'That did not work; please try again.';
    }
    if (reply) await this.#notify(msg, reply);
    return true;
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
    const ch = this.#o.channel(item.message.channelId);
    const mode = this.#o.queueModeOf?.(item.scope) ?? ch?.config.queue_mode ?? this.#o.limits().queue_mode;
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

  /** Re-dispatches what the previous process left: pending items, and running ones (their draft is reused). */
  recover(): number {
    // In cluster mode the stream keeps them; partition owners consume them.
    const items = this.#entry.local?.recover() ?? [];
    for (const item of items) this.#enqueue(item, []);
    if (items.length) this.#o.log.info({ count: items.length }, 'recovered unfinished messages from the inbox');
    return items.length;
  }

  /** Cancels a scope's running turn and drops its queued ones. */
  stop(scope: string, reason = 'stopped'): boolean {
    return this.#lanes.stop(scope, reason);
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
    this.#closing.abort();
    await this.#hold.close();
    await this.#lanes.drain(graceMs, this.#bound(signal));
  }
}
