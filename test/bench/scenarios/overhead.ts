import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AgentEvent } from '../../../src/contracts/agent-events.js';
import type { AgentRunner } from '../../../src/contracts/agent-runner.js';
import { parseConfig } from '../../../src/config/load.js';
import { kinds } from '../../helpers/kinds.js';
import { Dispatcher } from '../../../src/dispatch/dispatcher.js';
import { LocalTopology } from '../../../src/topology/local/local-topology.js';
import { createLogger } from '../../../src/observe/logger.js';
import { Metrics } from '../../../src/observe/metrics.js';
import { ConversationStore } from '../../../src/store/conversations.js';
import { openDb } from '../../../src/store/db.js';
import { Inbox } from '../../../src/store/inbox.js';
import { SessionStore } from '../../../src/store/sessions.js';
import { Workspace } from '../../../src/workspace/workspace.js';
import { LogSink } from '../../helpers/daemon.js';
import { RecordingAdapter, userMessage } from '../../helpers/recording-adapter.js';
import { percentile, type Row, type ScenarioOptions } from '../report.js';

/** An agent that costs nothing: the measured time is channeld's own. */
class ZeroRunner implements AgentRunner {
  readonly name = 'zero';
  async *run(): AsyncIterable<AgentEvent> {
    yield { type: 'text_delta', text: 'ok' };
    yield { type: 'done', usage: { inputTokens: 1, outputTokens: 1, estimated: true } };
  }
}

/**
 * Overhead per turn: the runtime with every built-in hook (session load and save on a WAL
 * database on disk, prompt assembly, tool selection), and dispatch (access rules, inbox
 * commit, lane scheduling). Agent and platform excluded.
 */
export async function overhead(o: ScenarioOptions): Promise<Row[]> {
  const n = o.smoke ? 20 : 3000;
  const dir = mkdtempSync(join(tmpdir(), 'channeld-bench-'));
  const db = openDb(join(dir, 'bench.db'));
  const log = createLogger({ level: 'warn', destination: new LogSink(), pretty: false });
  const { config } = parseConfig('[[channels]]\nid = "t"\ntype = "webchat"\n', 'bench.toml', kinds, {});
  const ws = new Workspace({
    name: 'default',
    config: config.agents.default!,
    log,
    sessions: new SessionStore(db),
    conversations: new ConversationStore(db),
    defaultQueueMode: () => 'followup',
    createRunner: () => new ZeroRunner(),
  });
  const sink = { push: () => {} };
  const runtimeMs: number[] = [];
  for (let i = 0; i < n + 50; i++) {
    const t0 = performance.now();
    await ws.runtime.run({
      message: userMessage('t', `message ${i}`, { chat: { id: `c${i % 50}`, type: 'dm' } }),
      scope: `t:c${i % 50}`,
      signal: new AbortController().signal,
      reply: sink,
    });
    if (i >= 50) runtimeMs.push(performance.now() - t0); // the first 50 warm the JIT and caches
  }

  const adapter = new RecordingAdapter('t');
  let started!: () => void;
  const dispatcher = new Dispatcher({
    topology: new LocalTopology(new Inbox(db)),
    metrics: new Metrics(false),
    log,
    limits: () => ({ ...config.limits, max_queued: n + 100 }),
    channel: () => ({ config: config.channels[0]!, adapter }),
    notify: async () => {},
    execute: async () => {
      started();
      return 'done';
    },
  });
  const dispatchMs: number[] = [];
  for (let i = 0; i < n + 50; i++) {
    const begun = new Promise<void>((r) => (started = r));
    const t0 = performance.now();
    await dispatcher.deliver(userMessage('t', `message ${i}`, { chat: { id: `d${i}`, type: 'dm' } }));
    await begun;
    if (i >= 50) dispatchMs.push(performance.now() - t0);
  }
  await dispatcher.shutdown(1000);
  db.close();
  rmSync(dir, { recursive: true, force: true });
  const r50 = percentile(runtimeMs, 50);
  const d50 = percentile(dispatchMs, 50);
  return [
    { scenario: 'overhead', metric: 'runtime p50 (all built-in hooks)', value: r50, unit: 'ms', target: '< 0.5 ms', met: r50 < 0.5 },
    { scenario: 'overhead', metric: 'runtime p99', value: percentile(runtimeMs, 99), unit: 'ms' },
    { scenario: 'overhead', metric: 'dispatch p50 (inbox commit → turn start)', value: d50, unit: 'ms' },
    { scenario: 'overhead', metric: 'dispatch + runtime p50', value: r50 + d50, unit: 'ms', target: '< 0.5 ms', met: r50 + d50 < 0.5 },
  ];
}
