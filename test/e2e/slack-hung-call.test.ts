import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SlackAdapter } from '../../channels/slack/adapter.js';
import { parseConfig } from '../../src/config/load.js';
import { Dispatcher, type DispatchChannel } from '../../src/dispatch/dispatcher.js';
import { LocalTopology } from '../../src/topology/local/local-topology.js';
import { HttpServer } from '../../src/observe/http-server.js';
import { createLogger } from '../../src/observe/logger.js';
import { Metrics } from '../../src/observe/metrics.js';
import { ConversationStore } from '../../src/store/conversations.js';
import { openDb, type Db } from '../../src/store/db.js';
import { Inbox } from '../../src/store/inbox.js';
import { SessionStore } from '../../src/store/sessions.js';
import { createTurnExecutor } from '../../src/workspace/execute.js';
import { Workspace } from '../../src/workspace/workspace.js';
import { FakeSlack } from '../fakes/slack/server.js';
import { LogSink, waitFor } from '../helpers/daemon.js';
import { kinds } from '../helpers/kinds.js';
import { scaled } from '../helpers/timing.js';

/**
 * A Slack Web API call that is never answered must not hold the conversation: the adapter
 * cuts it (its request timeout), the reply is retried and lands, the turn ends and the
 * conversation's lane takes the next message. Before, Slack's send/edit/delete dropped the
 * signal and its client had no timeout, so the turn, and every later message in that
 * conversation, waited forever.
 */
describe('Slack: a hung Web API call', () => {
  let sl: FakeSlack;
  let db: Db;
  let dispatcher: Dispatcher;
  const stop = new AbortController();
  const hardStop = new AbortController();
  const logs = new LogSink();
  let listening: Promise<void>;

  beforeEach(async () => {
    sl = new FakeSlack();
    await sl.start();
    const toml = `[agent]\nprovider = "echo"\necho_delay_ms = 0\n\n[[channels]]\nid = "sl"\ntype = "slack"\nbot_token_env = "SL_BOT"\napp_token_env = "SL_APP"\napi_url = "${sl.apiUrl}"\nallow_from = ["*"]\nnative_stream = false\n`;
    const { config } = parseConfig(toml, 'test.toml', kinds, { SL_BOT: sl.botToken, SL_APP: sl.appToken });
    const log = createLogger({ level: 'debug', destination: logs, pretty: false });
    const adapter = new SlackAdapter(
      { id: 'sl', mode: 'socket', apiUrl: sl.apiUrl, replyInThread: false, nativeStream: false, http: new HttpServer(), log, requestTimeoutMs: scaled(1000) },
      { botToken: sl.botToken, appToken: sl.appToken },
    );
    const ch: DispatchChannel = { config: config.channels[0]!, adapter };
    const channel = (id: string) => (id === 'sl' ? ch : undefined);
    db = openDb(':memory:');
    const inbox = new Inbox(db);
    const metrics = new Metrics(false);
    const conversations = new ConversationStore(db);
    const workspace = new Workspace({
      name: 'default',
      config: config.agents.default!,
      log,
      sessions: new SessionStore(db),
      conversations,
      defaultQueueMode: () => config.limits.queue_mode,
    });
    dispatcher = new Dispatcher({
      topology: new LocalTopology(inbox),
      metrics,
      log,
      limits: () => config.limits,
      channel,
      notify: async () => {},
      execute: createTurnExecutor({ channel, workspaceFor: () => workspace, metrics, log, hardStop: hardStop.signal }),
    });
    let connected!: () => void;
    const up = new Promise<void>((r) => (connected = r));
    listening = adapter.listen(
      (m) => dispatcher.deliver(m),
      stop.signal,
      () => connected(),
    );
    await up;
  });

  afterEach(async () => {
    await dispatcher.shutdown(1000);
    hardStop.abort();
    stop.abort();
    await listening;
    await sl.close();
    db.close();
  });

  it('is cut, the reply lands on a retry, and the next message in the conversation is answered', async () => {
    sl.fail('chat.postMessage', { hang: true });
    sl.push(sl.dmEvent('first question'));
    await waitFor(() => sl.texts('D0DM0001').includes('first question'), 10_000);
    // The first post was never answered; the reply came from the one after it.
    expect(sl.callsOf('chat.postMessage').length).toBeGreaterThanOrEqual(2);
    expect(logs.entries().some((l) => (l.err as { code?: string } | undefined)?.code === 'CHANNEL_REQUEST_TIMEOUT')).toBe(true);
    await waitFor(() => dispatcher.snapshot().inFlight === 0);

    sl.push(sl.dmEvent('second question'));
    await waitFor(() => sl.texts('D0DM0001').includes('second question'), 10_000);
    expect(sl.texts('D0DM0001')).toEqual(['first question', 'second question']);
  });
});
