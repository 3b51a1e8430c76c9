import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MatrixAdapter } from '../../../channels/matrix/adapter.js';
import { MattermostAdapter } from '../../../channels/mattermost/adapter.js';
import { TeamsAdapter } from '../../../channels/teams/adapter.js';
import { ServiceUrls } from '../../../channels/teams/conversations.js';
import { TelegramAdapter } from '../../../channels/telegram/adapter.js';
import type { ChannelAdapter, SentAt } from '../../../src/contracts/channel.js';
import type { HttpRoutes } from '../../../src/contracts/http.js';
import type { ReplyTarget } from '../../../src/contracts/message.js';
import { createLogger } from '../../../src/observe/logger.js';
import { FakeMatrix } from '../../fakes/matrix/server.js';
import { FakeMattermost } from '../../fakes/mattermost/server.js';
import { FakeTeams } from '../../fakes/teams/server.js';
import { FakeTelegram } from '../../fakes/telegram/server.js';

const noHttp: HttpRoutes = { route: () => () => {}, upgrade: () => () => {}, has: () => false, ownOrigin: () => true };
const log = createLogger({ level: 'silent' });
let dir = '';
const closers: Array<() => Promise<void>> = [];
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'channeld-sent-at-'));
});
afterAll(async () => {
  try {
    await Promise.allSettled(closers.reverse().map((close) => close()));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A platform's adapter on its fake, a chat to write in, and when the fake got its last send and edit. */
interface Platform {
  adapter: ChannelAdapter;
  target: ReplyTarget;
  arrivedAt(op: 'send' | 'edit'): number | undefined;
  texts(): string[];
}

const platforms: Record<string, () => Promise<Platform>> = {
  telegram: async () => {
    const tg = new FakeTelegram();
    await tg.start();
    closers.push(() => tg.close());
    const adapter = new TelegramAdapter({ id: 'tg', apiRoot: tg.url, mode: 'polling', nativeDrafts: false, richMessages: false, http: noHttp, log }, tg.token);
    closers.push(async () => adapter.close?.());
    return {
      adapter,
      target: { channelId: 'tg', chatId: '77', chatType: 'dm' },
      arrivedAt: (op) => tg.callsOf(op === 'send' ? 'sendMessage' : 'editMessageText').at(-1)?.at,
      texts: () => tg.texts(77),
    };
  },
  mattermost: async () => {
    const mm = new FakeMattermost();
    const url = await mm.start();
    closers.push(() => mm.close());
    const adapter = new MattermostAdapter({ id: 'mm', url, token: mm.token, teams: ['acme'], channels: [], log, cursorFile: join(dir, 'mm.cursor') });
    return {
      adapter,
      target: { channelId: 'mm', chatId: mm.dm.id, chatType: 'dm' },
      arrivedAt: (op) => mm.callsOf(op === 'send' ? 'create' : 'patch').at(-1)?.at,
      texts: () => mm.texts(mm.dm.id),
    };
  },
  matrix: async () => {
    const mx = new FakeMatrix();
    const url = await mx.start();
    closers.push(() => mx.close());
    const adapter = new MatrixAdapter(
      { id: 'mx', homeserverUrl: url, userId: mx.userId, rooms: [], autoJoin: false, allowFrom: ['*'], stateDir: dir, log },
      mx.token,
    );
    return {
      adapter,
      target: { channelId: 'mx', chatId: mx.dmRoom, chatType: 'dm' },
      // A send and an edit are both PUT …/send: the edit is the later one.
      arrivedAt: () => mx.callsOf('send').at(-1)?.at,
      texts: () => mx.texts(mx.dmRoom),
    };
  },
  teams: async () => {
    const ms = new FakeTeams();
    await ms.start();
    closers.push(() => ms.close());
    const conversation = 'a:conv-sent-at';
    // The conversation's serviceUrl as an earlier activity left it (the fake's Connector), so nothing goes to the real one.
    new ServiceUrls(dir, 'ms').set(conversation, ms.serviceUrl);
    const adapter = new TeamsAdapter(
      { id: 'ms', appId: ms.appId, tenantId: undefined, openIdMetadataUrl: ms.openIdUrl, tokenUrl: ms.tokenUrl, http: noHttp, stateDir: dir, log },
      ms.password,
    );
    return {
      adapter,
      target: { channelId: 'ms', chatId: conversation, chatType: 'dm' },
      arrivedAt: (op) => ms.calls.filter((c) => c.name === (op === 'send' ? 'send' : 'update')).at(-1)?.at,
      texts: () => ms.texts(conversation),
    };
  },
};

describe('adapters that can tell when a send or an edit went out', () => {
  it.each(Object.keys(platforms))("%s notes it in the caller's sentAt, before its fake got the request", async (name) => {
    const p = await platforms[name]!();
    const sent: SentAt = {};
    const before = Date.now();
    const ref = await p.adapter.send(p.target, 'first', { signal: AbortSignal.timeout(10_000), sentAt: sent });
    expect(sent.atMs).toBeGreaterThanOrEqual(before);
    expect(sent.atMs).toBeLessThanOrEqual(p.arrivedAt('send')!);

    const edited: SentAt = {};
    const beforeEdit = Date.now();
    await p.adapter.edit(ref, 'second', { signal: AbortSignal.timeout(10_000), sentAt: edited });
    expect(edited.atMs).toBeGreaterThanOrEqual(beforeEdit);
    expect(edited.atMs).toBeLessThanOrEqual(p.arrivedAt('edit')!);
    // A call that does not ask goes as before and leaves an earlier caller's note alone.
    const noted = edited.atMs;
    await p.adapter.edit(ref, 'third', { signal: AbortSignal.timeout(10_000) });
    expect(p.texts()).toEqual(['third']);
    expect(edited.atMs).toBe(noted);
  });
});
