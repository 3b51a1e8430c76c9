import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, expect } from 'vitest';
import { MattermostAdapter } from '../../../channels/mattermost/adapter.js';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import { FakeMattermost, type MmFakePost } from '../../fakes/mattermost/server.js';
import { waitFor } from '../../helpers/daemon.js';

export type Line = { msg: string; level: number; posts?: unknown; skipped?: number; before?: string; after?: string };

/**
 * Each test's fake server, cursor file and listener: `listen(cursorMs)` starts a new adapter's
 * listener as a restart whose cursor stands there (it catches up on what came after), or with
 * none as a first start (in cluster mode, `listenerMoves`: a lease moved here); `listenAgain()` starts the same adapter's listener again (a listener
 * restarted after a failure); `ended` is set when it ends.
 */
export function catchUpFixture(prefix: string) {
  const f = {
    mm: undefined as unknown as FakeMattermost,
    dir: '',
    cursorFile: '',
    stop: new AbortController(),
    lines: [] as Line[],
    delivered: [] as ChannelMessage[],
    ended: undefined as { err: unknown } | undefined,
    listening: undefined as Promise<void> | undefined,
    adapter: undefined as MattermostAdapter | undefined,
    listen(cursorMs: number | undefined, duplicateWindowMs?: number, listenerMoves = false): void {
      if (cursorMs !== undefined) writeFileSync(f.cursorFile, `${cursorMs}\n`);
      const log = pino({ level: 'info' }, { write: (s: string) => void f.lines.push(JSON.parse(s)) });
      f.adapter = new MattermostAdapter({
        id: 'mm',
        url: f.mm.url,
        token: f.mm.token,
        teams: [],
        channels: [],
        log,
        cursorFile: f.cursorFile,
        ...(duplicateWindowMs ? { duplicateWindowMs: () => duplicateWindowMs } : {}),
        listenerMoves,
        reconnectBaseMs: 10,
      });
      f.listenAgain();
    },
    listenAgain(): void {
      f.ended = undefined;
      f.listening = f.adapter!.listen(
        async (msg) => {
          f.delivered.push(msg);
          return true;
        },
        f.stop.signal,
        () => {},
      );
      f.listening.then(
        () => (f.ended = { err: undefined }),
        (err: unknown) => (f.ended = { err }),
      );
    },
    /**
     * Once the catch-up has listed the channels (`route`, its `lists`th list), a post over the
     * socket (in the channel `where` gives then, else the DM): handled only after the catch-up is done, so
     * its delivery says the catch-up ended without failing.
     */
    async afterCatchUp(route: 'myChannels' | 'channels' = 'myChannels', where?: () => { id: string }, lists = 1): Promise<MmFakePost> {
      await waitFor(() => f.ended || f.mm.callsOf(route).length >= lists);
      const live = f.mm.userPost('live', { channel: where?.() ?? f.mm.dm });
      await waitFor(() => f.ended || f.delivered.some((m) => m.messageId === live.id));
      expect(f.ended?.err).toBeUndefined();
      return live;
    },
    /** The catch-up logged what it delivered, or the listener ended. */
    untilCaughtUp: () => waitFor(() => f.ended || f.lines.some((l) => l.msg === 'Mattermost catch-up delivered missed posts'), 20_000),
  };
  beforeEach(async () => {
    f.mm = new FakeMattermost();
    await f.mm.start();
    f.dir = mkdtempSync(join(tmpdir(), prefix));
    f.cursorFile = join(f.dir, 'mm.cursor');
    f.stop = new AbortController();
    f.lines = [];
    f.delivered = [];
    f.ended = undefined;
    f.listening = undefined;
    f.adapter = undefined;
  });
  afterEach(async () => {
    f.stop.abort();
    await f.listening?.catch(() => {});
    await f.mm.close();
    rmSync(f.dir, { recursive: true, force: true });
  });
  return f;
}
