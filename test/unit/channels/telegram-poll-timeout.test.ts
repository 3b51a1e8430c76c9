import { afterEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import { POLL_MARGIN_S, TelegramAdapter } from '../../../channels/telegram/adapter.js';
import type { HttpRoutes } from '../../../src/contracts/http.js';
import { createLogger } from '../../../src/observe/logger.js';
import { FakeTelegram } from '../../fakes/telegram/server.js';
import { scaled } from '../../helpers/timing.js';

const noHttp: HttpRoutes = { route: () => () => {}, upgrade: () => () => {}, has: () => false, ownOrigin: () => true };

afterEach(() => vi.useRealTimers());

describe('Telegram long poll', () => {
  it('cuts a getUpdates the server never answers at the poll timeout plus the margin, not grammy 500 s', async () => {
    const tg = new FakeTelegram();
    await tg.start();
    onTestFinished(() => tg.close());
    const poll = 1;
    const adapter = new TelegramAdapter(
      {
        id: 'tg',
        apiRoot: tg.url,
        mode: 'polling',
        pollTimeoutSeconds: poll,
        nativeDrafts: false,
        richMessages: false,
        http: noHttp,
        log: createLogger({ level: 'silent' }),
      },
      tg.token,
    );
    // A hung Bot API server: the long poll is held far longer than grammy's own 500 s.
    tg.fail('getUpdates', { delayMs: 3_600_000 });
    // Timers only (not Date): the sockets stay real; the clock moves when the test says so.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const stop = new AbortController();
    onTestFinished(() => stop.abort());
    const listening = adapter.listen(
      async () => true,
      stop.signal,
      () => {},
    );
    const failure = listening.then(
      () => undefined,
      (err: unknown) => err,
    );
    await vi.waitFor(() => expect(tg.callsOf('getUpdates')).toHaveLength(1), { timeout: scaled(10_000), interval: 10 });
    // Just short of the cut: the poll is still waiting.
    await vi.advanceTimersByTimeAsync((poll + POLL_MARGIN_S) * 1000 - 100);
    expect(tg.hungUp).toEqual([]);
    await vi.advanceTimersByTimeAsync(100);
    await vi.waitFor(() => expect(tg.hungUp).toEqual(['getUpdates']), { timeout: scaled(5_000), interval: 10 });
    // grammy's own timeout (HttpError wrapping it), a retryable network failure: the channel reconnects.
    expect(await failure).toMatchObject({
      code: 'CHANNEL_NETWORK',
      retryable: true,
      cause: { error: { message: `Request to 'getUpdates' timed out after ${poll + POLL_MARGIN_S} seconds` } },
    });
  });
});
