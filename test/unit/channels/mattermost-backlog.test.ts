import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MattermostAdapter } from '../../../channels/mattermost/adapter.js';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import { FakeMattermost } from '../../fakes/mattermost/server.js';
import { waitFor } from '../../helpers/daemon.js';

/**
 * While `deliver` waits (storage down: the dispatcher's hold), WebSocket events must not queue
 * without bound behind it: past the cap the socket closes, and once deliveries move again the
 * reconnect's REST catch-up brings what it did not handle.
 */
describe('Mattermost: events behind a held delivery', () => {
  const CAP = 5;
  let mm: FakeMattermost;
  let dir: string;
  let stop: AbortController;
  let lines: Array<{ msg: string; reason?: string; posts?: number }>;
  let adapter: MattermostAdapter;
  beforeEach(async () => {
    mm = new FakeMattermost();
    const url = await mm.start();
    dir = mkdtempSync(join(tmpdir(), 'channeld-mm-backlog-'));
    stop = new AbortController();
    lines = [];
    const log = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s)) });
    adapter = new MattermostAdapter({
      id: 'mm',
      url,
      token: mm.token,
      teams: [],
      channels: [],
      log,
      cursorFile: join(dir, 'mm.cursor'),
      reconnectBaseMs: 10,
      maxWaitingEvents: CAP,
    });
  });
  afterEach(async () => {
    stop.abort();
    await mm.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('at most the cap waits: the socket closes, and once the delivery ends the catch-up brings every post once, in order', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const delivered: ChannelMessage[] = [];
    const listening = adapter.listen(
      async (msg) => {
        delivered.push(msg);
        await held;
        return true;
      },
      stop.signal,
      () => {},
    );
    await waitFor(() => mm.connected);
    const posts = [];
    let reachedSocket = 0;
    for (let i = 0; i < 4 * CAP; i++) {
      if (mm.connected) reachedSocket++;
      posts.push(mm.userPost(`post ${i}`, { channel: i % 3 ? mm.dm : mm.town }));
      // The client has read it (or closed): no timing guess.
      await mm.sync();
    }
    // One delivery held, CAP waiting behind it; the next one closed the socket, and nothing
    // reconnects while the delivery is held.
    expect(reachedSocket).toBe(CAP + 2);
    expect(mm.connected).toBe(false);
    expect(mm.connections).toBe(1);
    expect(delivered.map((m) => m.text)).toEqual(['post 0']);
    const lost = lines.filter((l) => l.msg === 'Mattermost WebSocket lost; reconnecting');
    expect(lost).toHaveLength(1);
    expect(lost[0]!.reason).toMatch(new RegExp(`^${CAP} events \\(\\d+ bytes\\) already wait behind a slow handler: closed, to catch up over REST`));

    release();
    await waitFor(() => lines.some((l) => l.msg === 'Mattermost catch-up delivered missed posts'));
    expect(mm.connections).toBe(2);
    // The inbox keys by post id: the catch-up starts at the cursor (the post held), so that one
    // comes twice and the inbox drops the second; every other post comes once.
    const ids = delivered.map((m) => m.messageId);
    const first = ids.filter((id, i) => ids.indexOf(id) === i);
    expect(ids.filter((id, i) => ids.indexOf(id) !== i)).toEqual([posts[0]!.id]);
    expect([...first].sort()).toEqual(posts.map((p) => p.id).sort());
    for (const channel of [mm.dm, mm.town]) {
      const inChannel = posts.filter((p) => p.channel_id === channel.id).map((p) => p.id);
      expect(first.filter((id) => inChannel.includes(id))).toEqual(inChannel);
    }
    // Live again: the next post comes over the new socket.
    const after = mm.userPost('after');
    await waitFor(() => delivered.at(-1)?.messageId === after.id);
    stop.abort();
    await listening;
  });
});
