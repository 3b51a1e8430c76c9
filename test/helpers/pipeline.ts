import { onTestFinished } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { kinds } from './kinds.js';
import type { DaemonConfig } from '../../src/config/schema.js';
import { Dispatcher, type DispatchChannel, type DispatcherOptions } from '../../src/dispatch/dispatcher.js';
import { LocalTopology } from '../../src/topology/local/local-topology.js';
import type { Topology } from '../../src/contracts/topology.js';
import { replyTargetOf } from '../../src/contracts/message.js';
import { createLogger } from '../../src/observe/logger.js';
import { Metrics } from '../../src/observe/metrics.js';
import { openDb, type Db } from '../../src/store/db.js';
import { Inbox } from '../../src/store/inbox.js';
import { createTurnExecutor, type TurnExecutorDeps } from '../../src/workspace/execute.js';
import { Workspace, type WorkspaceOptions } from '../../src/workspace/workspace.js';
import { ConversationStore } from '../../src/store/conversations.js';
import { SessionStore } from '../../src/store/sessions.js';
import { LogSink } from './daemon.js';
import { RecordingAdapter } from './recording-adapter.js';

export interface Pipeline {
  dispatcher: Dispatcher;
  adapter: RecordingAdapter;
  inbox: Inbox;
  sessions: SessionStore;
  conversations: ConversationStore;
  db: Db;
  metrics: Metrics;
  workspace: Workspace;
  config: DaemonConfig;
  logs: LogSink;
  /** The daemon's "exit now": aborts every platform call still in flight. */
  hardStop: AbortController;
  /** Shuts down as the daemon does: turns get `graceMs`, then the hard stop at twice that. */
  close(graceMs?: number): Promise<void>;
}

/**
 * The real turn path without a network: Dispatcher → Workspace runtime (echo agent) →
 * ReplyStream → a RecordingAdapter on channel "t". `toml` is appended to a config whose
 * only channel is "t" (a webchat-typed section carrying the channel keys under test).
 */
export function pipeline(
  toml = '',
  channelKeys = '',
  options: {
    db?: Db;
    /** The daemon's store shape (a group commit behind it) instead of a bare one on `db`. */
    sessions?: SessionStore;
    adapter?: RecordingAdapter;
    workspace?: Partial<WorkspaceOptions>;
    executor?: Pick<TurnExecutorDeps, 'fenceOf' | 'onSent'>;
    dispatcher?: Pick<DispatcherOptions, 'onReceived'>;
    /** The topology over the pipeline's inbox (a LocalTopology by default). */
    topology?: (inbox: Inbox) => Topology;
  } = {},
): Pipeline {
  const { config } = parseConfig(`${toml}\n[[channels]]\nid = "t"\ntype = "webchat"\n${channelKeys}`, 'test.toml', kinds, {});
  const logs = new LogSink();
  const log = createLogger({ level: 'debug', destination: logs, pretty: false });
  const db = options.db ?? openDb(':memory:');
  const inbox = new Inbox(db);
  const metrics = new Metrics(false);
  const adapter = options.adapter ?? new RecordingAdapter('t');
  const ch: DispatchChannel = { config: config.channels[0]!, adapter };
  const channel = (id: string) => (id === 't' ? ch : undefined);
  const conversations = new ConversationStore(db);
  const sessions = options.sessions ?? new SessionStore(db);
  const workspace = new Workspace({
    name: 'default',
    config: config.agents.default!,
    log,
    sessions,
    conversations,
    defaultQueueMode: () => ch.config.queue_mode ?? config.limits.queue_mode,
    ...options.workspace,
  });
  const hardStop = new AbortController();
  const dispatcher = new Dispatcher({
    hardStop: hardStop.signal,
    topology: options.topology?.(inbox) ?? new LocalTopology(inbox),
    metrics,
    log,
    limits: () => config.limits,
    channel,
    queueModeOf: (scope) => conversations.get('default', scope).queueMode,
    agentOf: () => ({ agent: 'default', max: config.agents.default!.max_in_flight }),
    notify: async (msg, text) => void (await adapter.send(replyTargetOf(msg), text)),
    execute: createTurnExecutor({ channel, workspaceFor: () => workspace, metrics, log, hardStop: hardStop.signal, ...options.executor }),
    ...options.dispatcher,
  });
  return {
    dispatcher,
    adapter,
    inbox,
    sessions,
    conversations,
    db,
    metrics,
    workspace,
    config,
    logs,
    hardStop,
    close: async (graceMs = 1000) => {
      // As Daemon.stop: a platform call that never answers cannot hold the exit.
      const hard = setTimeout(() => hardStop.abort(new Error('shutdown grace ran out')), 2 * graceMs);
      try {
        await dispatcher.shutdown(graceMs);
      } finally {
        clearTimeout(hard);
        hardStop.abort();
      }
      if (!options.db) db.close();
    },
  };
}

/** `pipeline(...)`, closed when the test finishes (a test may close it itself first, as the daemon would). */
export function withPipeline(...args: Parameters<typeof pipeline>): Pipeline {
  const p = pipeline(...args);
  onTestFinished(() => p.close());
  return p;
}
