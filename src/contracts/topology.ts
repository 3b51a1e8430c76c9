import type { ChannelAdapter } from './channel.js';
import type { SharedRecord } from './shared-record.js';
import type { ParsedCommand } from './commands.js';
import type { ChannelMessage, MessageRef } from './message.js';

/**
 * The fence of a topology where nothing can take a conversation away (one node): never aborts.
 * Callers compare against it to skip combining it with their own signal (`AbortSignal.any`
 * per turn costs CPU and keeps a composite signal registered for nothing).
 */
export const NEVER_FENCED: AbortSignal = new AbortController().signal;

/**
 * The states of an inbox item as they are persisted (the SQLite `inbox.state` column, the
 * cluster's `items.state`):
 *
 * - `pending`: stored, not answered yet.
 * - `running`: its turn runs. Persisted with the first reply ref only: until then the row
 *   says pending, one commit fewer per turn, and recovery treats both alike.
 * - `done`: answered (or a control command, stored as done when it arrives).
 * - `failed`: its turn failed or was cancelled, or it was dropped from its queue.
 * - `refused`: the queue was full (the sender got the busy reply).
 */
export type InboxState = 'pending' | 'running' | 'done' | 'failed' | 'refused';

/**
 * Where an item is in this process: a persisted state, or `queued` (waiting in a lane;
 * persisted as pending). Only src/inbox/lifecycle.ts moves an item from one to another.
 */
export type ItemState = InboxState | 'queued';

export interface InboxItem {
  id: number;
  scope: string;
  message: ChannelMessage;
  state: ItemState;
  /** The platform messages that answered (or are answering) this item. */
  replyRefs: MessageRef[];
}

/**
 * Where item states are persisted: the SQLite inbox or the cluster's shared inbox. The
 * lifecycle (src/inbox/lifecycle.ts) decides every state; a store only writes what it is told.
 */
export interface ItemStore {
  setState(id: number, state: InboxState, error?: string): void;
  /** Persists the messages answering an item, and that it runs. */
  setReplyRefs(id: number, refs: readonly MessageRef[]): void;
  /**
   * The item's turn stopped unfinished here: nothing is written for it, but what it wrote
   * (its reply refs) is committed before it can be handed on (cluster mode: before its
   * partition's lease goes). Optional: the SQLite inbox commits in order anyway.
   */
  interrupted?(id: number): void;
}

/**
 * What taking a message in came to: `run` — stored, and this instance runs it now (it is
 * queued in its lane); `stored` — durably stored, it runs where its conversation is served
 * (it comes back through `TopologyWork.enqueue` there); `duplicate` — a redelivery already
 * stored; `full` — the durable inbox is full (the sender gets the busy reply).
 */
export type Admission = { run: InboxItem } | 'stored' | 'duplicate' | 'full';

/** A message waiting to be stored: its conversation scope and the unaddressed context before it. */
export interface Incoming {
  msg: ChannelMessage;
  scope: string;
  passive: ChannelMessage[];
}

/** How a received message enters the durable inbox. */
export interface TopologyIntake extends ItemStore {
  /** What stores a message, for traces and logs: `sqlite` (this instance's inbox) or `jetstream` (the cluster's shared stream). */
  readonly store: 'sqlite' | 'jetstream';
  /** False while the durable inbox refuses writes: new messages are held in memory (src/dispatch/hold.ts). */
  readonly writable: boolean;
  /**
   * How long a message stored again (a redelivery, or a schedule's catch-up firing under the
   * same id) is still recognised as a duplicate: older catch-ups would run a second turn.
   */
  duplicateWindowMs(): number;
  /** Stores one message before the platform is acknowledged; rejects (coded, retryable) when it cannot now. */
  receive(incoming: Incoming): Promise<Admission>;
  /**
   * Stores held messages in order, one result per message. A store may stop at the first it
   * refuses (rejected), so none overtakes another; the ones after it are left out.
   */
  receiveBatch(batch: readonly Incoming[]): Promise<Array<PromiseSettledResult<Admission>>>;
}

/** A control reply the sender gets (undefined: nothing to say), or `duplicate` for a redelivered command (nothing was done). */
export type ControlOutcome = string | undefined | 'duplicate';

/**
 * Whose work a chat /stop ends in its conversation: the queued messages of `senderId`
 * (everyone's when undefined), and the running turn when one of those started it or
 * `runningOfAnyone` (the channel's admins, and anyone in a DM).
 */
export interface StopOrder {
  senderId?: string;
  runningOfAnyone: boolean;
}

/** What a chat /stop did: whether it cancelled the running turn (its stop marker is the visible answer), how many queued messages it dropped. */
export interface StopResult {
  cancelled: boolean;
  dropped: number;
}

/** Where control commands run: on the instance that runs the turn they act on. */
export interface ControlRouting {
  /**
   * A chat `/stop`, recorded so a redelivery does nothing (`duplicate`). `order` says whose
   * work it ends (undefined: the /stop is refused, only recorded); `here` ends it on this
   * instance's lanes. A topology whose turns may run elsewhere ends it where they run, with
   * the same order, so a group member's /stop stops only what that member started.
   */
  stop(msg: ChannelMessage, scope: string, order: StopOrder | undefined, here: (order: StopOrder) => StopResult): Promise<StopResult | 'duplicate'>;
  /**
   * `/approve`, `/deny`, `/stop tool`: run where the turn they act on runs; `here` runs it on
   * this instance (when it runs the turn, or nobody does now). Rejects only when the command
   * could not be recorded (the platform delivers it again).
   */
  control(msg: ChannelMessage, scope: string, cmd: ParsedCommand, here: () => Promise<string | undefined>): Promise<ControlOutcome>;
  /**
   * A bare `/stop` in a group (not addressed to the bot) from a sender with no turn on this
   * instance: ends the sender's own running turn and queued messages where they run, if that
   * is elsewhere. Undefined when nothing of theirs was stopped: the message stays context.
   * Absent where every turn runs here.
   */
  stopBare?(msg: ChannelMessage, scope: string): Promise<StopResult | 'duplicate' | undefined>;
  /** The operator's stop of one turn by id: `here` stops it on this instance; otherwise wherever it runs. */
  stopTurn(id: string, here: () => 'cancelled' | 'dropped' | undefined): Promise<'cancelled' | 'dropped' | undefined>;
}

/** What the topology asks of this instance's dispatcher (implemented by src/dispatch/dispatcher.ts). */
export interface TopologyWork {
  /** Queues an item that is already stored. */
  enqueue(item: InboxItem, passive: ChannelMessage[]): void;
  /**
   * Keeps the scope's turns from starting until the returned release is called (idempotent):
   * its items are still queued, stoppable and released as usual. A takeover holds a scope
   * while the rest of a batch run before is handed in, so the batch starts again as one.
   */
  hold(scope: string): () => void;
  /** Whether this instance runs the channel now (its config has it): an item of another channel cannot run here. */
  knows(channelId: string): boolean;
  /** Forgets the matching scopes' queued items; their running turns get `graceMs` to finish. */
  release(match: (scope: string) => boolean, graceMs: number, signal?: AbortSignal): Promise<void>;
  /** A chat /stop of a scope whose partition this instance owns: ends what `order` names, as on one node. */
  stop(scope: string, order: StopOrder, reason: string): StopResult;
  stopTurn(id: string): 'cancelled' | 'dropped' | undefined;
  /** Runs a control command here; undefined when it is not one. */
  runControl(msg: ChannelMessage, scope: string, cmd: ParsedCommand): Promise<string | undefined> | undefined;
  /** What this instance runs now (heartbeats tell the others). */
  load(): { inFlight: number; queued: number };
}

/** A channel's listener as the topology sees it, to decide where it may run. */
export interface ListenerSpec {
  /** The channel id. */
  id: string;
  /** The listener must run on one instance at a time (ChannelDescriptor `exclusiveListener`). */
  exclusive: boolean;
  /** Into how many separately owned parts it splits (`listenerParts`; 1: whole). */
  parts: number;
}

/** The shared state of conversations: made current before a turn, and the write path of replies. */
export interface SharedState {
  /** Makes the conversation's state (session, preferences, spend) current here before its turn. */
  prepare(scope: string, channelId: string): Promise<void>;
  /** Resolves once a new reply message's id can be stored (ReplyStreamOptions.beforeSend). */
  whenWritable(signal: AbortSignal): Promise<unknown>;
}

/** The cluster part of /status (and `channeld status`, /admin). */
export interface ClusterStatus {
  instance: string;
  namespace: string;
  partitions: { total: number; owned: number[] };
  instances: Array<{ id: string; alive: boolean; age_ms: number } & Record<string, unknown>>;
  leases: Array<{ key: string; owner: string; age_ms: number; expired: boolean }>;
  ops: Record<string, number>;
  /** Items of the partitions consumed here that wait for their channel (src/cluster/waiting-channels.ts). */
  waiting_for_channel?: WaitingForChannelStatus;
}

/**
 * Items a partition's owner took in for a channel it does not run yet (instances reloaded one
 * after another): unacked in the stream and not turns yet, so `turns.queued` does not count them.
 */
export interface WaitingForChannelStatus {
  total: number;
  /** Per channel id; the channel is missing from this instance's `channels`, which is why they wait. */
  by_channel: Record<string, number>;
}

/**
 * What differs between one instance and a cluster, behind one contract: the dispatcher,
 * lanes and daemon call it the same way in both modes, and the mode is chosen once, at
 * composition (src/daemon/topology.ts). Implemented by src/topology/local (one node:
 * SQLite inbox, controls here, no fencing) and src/topology/cluster (NATS JetStream and
 * PostgreSQL). Every member is required: an implementation says what it does for each.
 */
export interface Topology {
  /** Intake: how a received message enters the durable inbox. */
  readonly intake: TopologyIntake;
  /** Control routing: `/stop`, `/stop tool`, approvals decided on another instance, the operator's stop. */
  readonly controls: ControlRouting;
  /**
   * Recovery: the items a crash left that this instance runs now, as pending (a `running`
   * one continues its draft). One node: the SQLite inbox's unfinished items; cluster: none
   * here — the partition consumers hand in what other instances left (`serve`).
   */
  recover(): InboxItem[];
  /**
   * Serving: takes this instance's share of the stored work into `work` and answers control
   * requests for it (cluster: heartbeat, partitions, the /stop and control subjects; one node:
   * nothing to serve). Started once every channel can send; resolves with how to stop.
   */
  serve(work: TopologyWork): Promise<() => Promise<void>>;
  /** Fencing: aborted when this instance may no longer write for the scope (its reply stops). */
  fenceOf(scope: string): AbortSignal;
  /** Lease ownership of listeners: the adapter whose listener runs only where this instance may run it. */
  gate(listener: ListenerSpec, adapter: ChannelAdapter): ChannelAdapter;
  /** Shared state of conversations. */
  readonly state: SharedState;
  /**
   * Records a channel keeps where every instance reads them (ChannelContext.sharedRecord):
   * the record named `name` of channel `channelId`, which throws SHARED_RECORD_INVALID for a name
   * outside SHARED_RECORD_NAME. Cluster: PostgreSQL; one node: undefined, for the channel's
   * own files are read by the only instance there is.
   */
  sharedRecords(channelId: string): ((name: string) => SharedRecord) | undefined;
  /** The cluster part of /status; undefined when there is no cluster to report. */
  status(): ClusterStatus | undefined;
}

/** The reply to a chat /stop when no stopped turn shows its stop marker: something was stopped, or nothing was. */
export const STOP_REPLIES = { stopped: 'Stopped.', nothing: 'Nothing to stop.' } as const;

/** Why a message a chat /stop dropped, or a turn it cancelled, ended (the item's recorded error). */
export const STOPPED_BY_STOP = 'stopped by /stop';

/**
 * What a user is told when a message of theirs was not kept because too many already wait for
 * storage (the dispatcher's hold past its bound, a listener's own pending bound): they must send it again.
 */
export const NOT_KEPT_REPLY =
  'Sorry, storage is unavailable and too many messages are already waiting: this message was not kept. Please send it again in a few minutes.';
