import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TelegramAdapter } from '../../../channels/telegram/adapter.js';
import type { SentAt } from '../../../src/contracts/channel.js';
import type { HttpRoutes } from '../../../src/contracts/http.js';
import { createLogger } from '../../../src/observe/logger.js';
import { FakeTelegram } from '../../fakes/telegram/server.js';

const noHttp: HttpRoutes = { route: () => () => {}, upgrade: () => () => {}, has: () => false, ownOrigin: () => true };

describe('Telegram adapter: when a send or an edit went out', () => {
  const tg = new FakeTelegram();
  let adapter: TelegramAdapter;
  beforeAll(async () => {
    await tg.start();
    adapter = new TelegramAdapter(
      { id: 'tg', apiRoot: tg.url, mode: 'polling', nativeDrafts: false, richMessages: false, http: noHttp, log: createLogger({ level: 'silent' }) },
      tg.token,
    );
  });
  afterAll(async () => {
    await adapter.close();
    await tg.close();
  });

  it("notes in the caller's sentAt when its request went out, before the Bot API got it", async () => {
    const target = { channelId: 'tg', chatId: '77', chatType: 'dm' as const };
    const sent: SentAt = {};
    const before = Date.now();
    const ref = await adapter.send(target, 'first', { signal: AbortSignal.timeout(10_000), sentAt: sent });
    expect(sent.atMs).toBeGreaterThanOrEqual(before);
    expect(sent.atMs).toBeLessThanOrEqual(tg.callsOf('sendMessage').at(-1)!.at);

    const edited: SentAt = {};
    const beforeEdit = Date.now();
    await adapter.edit(ref, 'second', { signal: AbortSignal.timeout(10_000), sentAt: edited });
    expect(edited.atMs).toBeGreaterThanOrEqual(beforeEdit);
    expect(edited.atMs).toBeLessThanOrEqual(tg.callsOf('editMessageText').at(-1)!.at);
    // A call that does not ask goes as before.
    await adapter.edit(ref, 'third', { signal: AbortSignal.timeout(10_000) });
    expect(tg.texts(77)).toEqual(['third']);
  });
});
