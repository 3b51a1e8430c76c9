import { describe, expect, it } from 'vitest';
import { SlackAdapter } from '../../channels/slack/adapter.js';
import { HttpServer } from '../../src/observe/http-server.js';
import { createLogger } from '../../src/observe/logger.js';
import { FakeSlack } from '../fakes/slack/server.js';
import { LogSink, waitFor } from '../helpers/daemon.js';

/**
 * An envelope still being stored when the listener stops (an upgrade hands Slack over to the
 * new process, a reload, shutdown) is acked on its own socket before it closes: otherwise
 * Slack sends it again and the delivery counts as never acked (test/e2e/upgrade-overlap.test.ts
 * failed by chance on exactly this).
 */
describe('Slack Socket Mode: stopping the listener', () => {
  it('acks an envelope that was being stored before the socket closes', async () => {
    const sl = new FakeSlack();
    await sl.start();
    try {
      const log = createLogger({ level: 'error', destination: new LogSink(), pretty: false });
      const adapter = new SlackAdapter(
        { id: 'sl', mode: 'socket', apiUrl: sl.apiUrl, replyInThread: false, nativeStream: false, http: new HttpServer(), log },
        { botToken: sl.botToken, appToken: sl.appToken },
      );
      const stop = new AbortController();
      let storing = false;
      let stored!: () => void;
      const deliver = async () => {
        storing = true;
        // The store takes a moment (a busy disk): the stop comes meanwhile.
        await new Promise<void>((r) => (stored = r));
        return true;
      };
      let connected = false;
      const listening = adapter.listen(deliver, stop.signal, () => (connected = true));
      await waitFor(() => connected, 10_000);
      const id = sl.push(sl.dmEvent('stored at the stop'));
      await waitFor(() => storing, 10_000);
      stop.abort();
      setTimeout(() => stored(), 100);
      await listening;
      expect(sl.ackLog.map((a) => a.id)).toEqual([id]);
      expect(sl.unacked).toBe(0);
    } finally {
      await sl.close();
    }
  });
});
