import type { ChannelAdapter } from '../../contracts/channel.js';
import type { ParsedCommand } from '../../contracts/commands.js';
import type { ChannelMessage, MessageRef } from '../../contracts/message.js';
import type {
  Admission,
  ControlOutcome,
  ControlRouting,
  InboxItem,
  InboxState,
  Incoming,
  ListenerSpec,
  SharedState,
  StopOrder,
  StopResult,
  Topology,
  TopologyIntake,
  TopologyWork,
} from '../../contracts/topology.js';
import { NEVER_FENCED } from '../../contracts/topology.js';
import { LocalIntake, type LocalItemStore } from '../../inbox/lifecycle.js';

/** The SQLite inbox as the intake: messages are stored, then run here. */
class SqliteIntake implements TopologyIntake {
  readonly store = 'sqlite';
  readonly #store: LocalItemStore;
  readonly #retentionMs: () => number;
  readonly local: LocalIntake;

  constructor(store: LocalItemStore, retentionMs: () => number) {
    this.#store = store;
    this.#retentionMs = retentionMs;
    this.local = new LocalIntake(store);
  }

  /** A stored message is kept (and its id recognised) until the inbox prunes it. */
  duplicateWindowMs(): number {
    return this.#retentionMs();
  }

  get writable(): boolean {
    return this.local.writable;
  }

  async receive({ msg, scope }: Incoming): Promise<Admission> {
    const item = await this.local.tryReceive(msg, scope);
    return item ? { run: item } : 'duplicate';
  }

  /** One transaction for the batch (the messages share the microtask's commit), each settled on its own. */
  receiveBatch(batch: readonly Incoming[]): Promise<Array<PromiseSettledResult<Admission>>> {
    return Promise.allSettled(batch.map((h) => this.receive(h)));
  }

  setState(id: number, state: InboxState, error?: string): void {
    this.#store.setState(id, state, error);
  }

  setReplyRefs(id: number, refs: readonly MessageRef[]): void {
    this.#store.setReplyRefs(id, refs);
  }
}

/** Controls run here, each stored as done when it arrives so a redelivery is recognised and not acted on twice. */
class LocalControls implements ControlRouting {
  constructor(private readonly intake: LocalIntake) {}

  /** While the store refuses writes /stop acts at once without the record (a redelivery stops nothing again). */
  async stop(msg: ChannelMessage, scope: string, order: StopOrder | undefined, here: (order: StopOrder) => StopResult): Promise<StopResult | 'duplicate'> {
    if (!(await this.intake.recordCommand(msg, scope, false))) return 'duplicate';
    return order ? here(order) : { cancelled: false, dropped: 0 };
  }

  /** The record is required: a store failure rejects, and the platform delivers the command again. */
  async control(msg: ChannelMessage, scope: string, _cmd: ParsedCommand, here: () => Promise<string | undefined>): Promise<ControlOutcome> {
    if (!(await this.intake.recordCommand(msg, scope, true))) return 'duplicate';
    return here();
  }

  async stopTurn(_id: string, here: () => 'cancelled' | 'dropped' | undefined): Promise<'cancelled' | 'dropped' | undefined> {
    return here();
  }
}

export interface LocalTopologyOptions {
  /** Resolves once a new reply message's id can be stored (the SQLite write path's health); at once when not given. */
  whenWritable?(signal: AbortSignal): Promise<unknown>;
  /** How long the inbox keeps items (`[daemon] inbox_retention_hours`); forever (nothing prunes) when not given. */
  retentionMs?(): number;
}

/**
 * One instance on its own: the SQLite inbox is the intake and the recovery (what a crash
 * left runs again at start), controls run here, nothing fences a reply, every listener runs
 * here, and conversation state is already local.
 */
export class LocalTopology implements Topology {
  readonly intake: SqliteIntake;
  readonly controls: ControlRouting;
  readonly state: SharedState;

  constructor(store: LocalItemStore, options: LocalTopologyOptions = {}) {
    this.intake = new SqliteIntake(store, options.retentionMs ?? (() => Number.POSITIVE_INFINITY));
    this.controls = new LocalControls(this.intake.local);
    this.state = { prepare: async () => {}, whenWritable: options.whenWritable ?? (async () => true) };
  }

  /** Items a previous process left stored and unanswered: a `running` one continues its draft. */
  recover(): InboxItem[] {
    return this.intake.local.recover();
  }

  /** Nothing to serve for others: there are no others. */
  async serve(_work: TopologyWork): Promise<() => Promise<void>> {
    return async () => {};
  }

  /** Nothing fences a reply on one node: no other instance can take its conversation. */
  fenceOf(_scope: string): AbortSignal {
    return NEVER_FENCED;
  }

  gate(_listener: ListenerSpec, adapter: ChannelAdapter): ChannelAdapter {
    return adapter;
  }

  /** None: no other instance ever runs the channel's listener, so its own files in the state_dir are all it needs. */
  sharedRecords(_channelId: string): undefined {
    return undefined;
  }

  status(): undefined {
    return undefined;
  }
}
