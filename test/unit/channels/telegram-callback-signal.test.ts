import { describe, expect, it, onTestFinished } from 'vitest';
import { TelegramAdapter } from '../../../channels/telegram/adapter.js';
import type { HttpRoutes } from '../../../src/contracts/http.js';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import { createLogger } from '../../../src/observe/logger.js';
import { FakeTelegram } from '../../fakes/telegram/server.js';
import { waitFor } from '../../helpers/daemon.js';
import { scaled } from '../../helpers/timing.js';

const noHttp: HttpRoutes = { route: () => () => {}, upgrade: () => () => {}, has: () => false, ownOrigin: () => true };

describe('Telegram answerCallbackQuery', () => {
  it('is cut when the channel stops: it takes the listen signal', async () => {
    const tg = new FakeTelegram();
    await tg.start();
    onTestFinished(() => tg.close());
    const adapter = new TelegramAdapter(
      {
        id: 'tg',
        apiRoot: tg.url,
        mode: 'polling',
        pollTimeoutSeconds: 1,
        nativeDrafts: false,
        richMessages: false,
        http: noHttp,
        log: createLogger({ level: 'silent' }),
      },
      tg.token,
    );
    const stop = new AbortController();
    onTestFinished(() => stop.abort());
    await adapter.send({ channelId: 'tg', chatId: '42', chatType: 'dm' }, 'Approve?', { signal: stop.signal, buttons: [{ label: 'Yes', data: 'yes' }] });
    // The server holds the answer far longer than the test runs.
    tg.fail('answerCallbackQuery', { delayMs: 600_000 });
    const got: ChannelMessage[] = [];
    const listening = adapter.listen(
      async (m) => {
        got.push(m);
        return true;
      },
      stop.signal,
      () => {},
    );
    tg.click(tg.messages.at(-1)!, 'Yes');
    await waitFor(() => tg.callsOf('answerCallbackQuery').length > 0, scaled(10_000));
    expect(got.map((m) => m.text)).toEqual(['yes']);

    stop.abort();
    await listening.catch(() => {});
    await waitFor(() => tg.hungUp.includes('answerCallbackQuery'), scaled(10_000));
  });
});
