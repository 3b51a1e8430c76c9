import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MattermostAdapter } from '../../../channels/mattermost/adapter.js';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import { FakeMattermost, type MmFakePost } from '../../fakes/mattermost/server.js';
import { waitFor } from '../../helpers/daemon.js';

/** The bound rest.ts reads an answer within (its MAX_ANSWER_BYTES), which the fix keeps. */
const MAX_ANSWER_BYTES = 8 * 1024 * 1024;
/** Props the size of a large integration post's attachments. */
const props = (bytes: number) => ({ attachments: [{ text: 'x'.repeat(bytes) }] });

/**
 * The REST catch-up reads a channel a page at a time within the 8 MiB answer bound: a page over
 * it is asked for again smaller rather than parking the channel, and a post too large alone is
 * skipped with a warning naming it.
 */
describe('Mattermost: catch-up pages over the answer bound', () => {
  let mm: FakeMattermost;
  let dir: string;
  let cursorFile: string;
  let stop: AbortController;
  let lines: Array<{ msg: string; level: number; posts?: unknown; skipped?: number }>;
  let delivered: ChannelMessage[];
  let ended: { err: unknown } | undefined;
  let listening: Promise<void> | undefined;

  beforeEach(async () => {
    mm = new FakeMattermost();
    await mm.start();
    dir = mkdtempSync(join(tmpdir(), 'channeld-mm-pages-'));
    cursorFile = join(dir, 'mm.cursor');
    stop = new AbortController();
    lines = [];
    delivered = [];
    ended = undefined;
    listening = undefined;
  });
  afterEach(async () => {
    stop.abort();
    await listening?.catch(() => {});
    await mm.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A restart whose cursor stands at `cursorMs`: the listener catches up on what came after. */
  const listen = (cursorMs: number) => {
    writeFileSync(cursorFile, `${cursorMs}\n`);
    const log = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s)) });
    const adapter = new MattermostAdapter({ id: 'mm', url: mm.url, token: mm.token, teams: [], channels: [], log, cursorFile, reconnectBaseMs: 10 });
    listening = adapter.listen(
      async (msg) => {
        delivered.push(msg);
        return true;
      },
      stop.signal,
      () => {},
    );
    listening.then(
      () => (ended = { err: undefined }),
      (err: unknown) => (ended = { err }),
    );
  };
  /** The catch-up finished, or the listener ended (before the fix: parked by a non-retryable error). */
  const caughtUp = async () => {
    await waitFor(() => ended || lines.some((l) => l.msg === 'Mattermost catch-up delivered missed posts'), 20_000);
    expect(ended?.err).toBeUndefined();
  };
  /** The catch-up's reads of posts: where from (posts by name), how many, and the offset when not 0. */
  const reads = (names: Record<string, MmFakePost>) => {
    const name = (id: string | null) => Object.entries(names).find(([, p]) => p.id === id)?.[0] ?? id;
    return mm.callsOf('since').map(({ query: q }) => {
      const from = q.has('before') ? `before ${name(q.get('before'))}` : q.has('after') ? `after ${name(q.get('after'))}` : 'newest';
      return `${from} ${q.get('per_page')}${q.get('page') === '0' ? '' : ` page ${q.get('page')}`}`;
    });
  };
  const halving = (from: string) => ['200', '100', '50', '25', '13', '7', '4', '2', '1'].map((n) => `${from} ${n}`);
  const cursorIs = (post: MmFakePost) => waitFor(async () => (await readFile(cursorFile, 'utf8')) === `${post.create_at}\n`);

  it('a page over 8 MiB is asked for again at half the size until it fits; the next page is full size; every post comes once, in order', async () => {
    const old = mm.userPost('before the cursor');
    const posts = Array.from({ length: 40 }, (_, i) => mm.userPost(`long ${i}`, { props: props(300_000) }));
    // 40 posts of 300 kB: more than the bound in one answer, 25 of them fit.
    expect(40 * 300_000).toBeGreaterThan(MAX_ANSWER_BYTES);
    expect(25 * 300_500).toBeLessThan(MAX_ANSWER_BYTES);
    listen(old.create_at + 1);
    await caughtUp();

    expect(delivered.map((m) => m.messageId)).toEqual(posts.map((p) => p.id));
    // Back from the newest: 200, 100, 50 over the bound, 25 fit; the next page (the 15 older
    // ones and the boundary) asks 200 again, and so does the read forward from there.
    expect(reads({ p14: posts[14]!, p15: posts[15]! })).toEqual(['newest 200', 'newest 100', 'newest 50', 'newest 25', 'before p15 200', 'after p14 200']);
    expect(lines.filter((l) => l.level >= 40)).toEqual([]);
    await cursorIs(posts.at(-1)!);
    // Still listening: the next post comes over the socket.
    const live = mm.userPost('live');
    await waitFor(() => delivered.at(-1)?.messageId === live.id);
  });

  it('a post whose answer alone is over 8 MiB is skipped with a warning naming it; the posts around it come, in order', async () => {
    const old = mm.userPost('before the cursor');
    const a = mm.userPost('a');
    const huge = mm.userPost('huge', { props: props(MAX_ANSWER_BYTES + 1) });
    const b = mm.userPost('b');
    listen(old.create_at + 1);
    await caughtUp();

    expect(delivered.map((m) => m.messageId)).toEqual([a.id, b.id]);
    const warned = lines.filter((l) => l.level === 40);
    expect(warned).toEqual([
      expect.objectContaining({ msg: 'Mattermost post too large to read (its answer alone is over the bound) skipped by the catch-up', posts: [huge.id] }),
    ]);
    expect(lines.find((l) => l.msg === 'Mattermost catch-up delivered missed posts')).toMatchObject({ posts: 2, skipped: 1 });
    // Back: b alone fits; the page before it is over the bound down to one post, which b's
    // cursor names; the walk goes on from it at the full size, and forwards from a it is not
    // asked for again.
    expect(reads({ a, b, huge })).toEqual([...halving('newest'), ...halving('before b'), 'before huge 200', 'after huge 200']);
    await cursorIs(b);
  });

  it("a channel's newest post too large alone is skipped, and the cursor moves past it", async () => {
    const old = mm.userPost('before the cursor');
    const a = mm.userPost('a');
    const huge = mm.userPost('huge', { props: props(MAX_ANSWER_BYTES + 1) });
    listen(old.create_at + 1);
    await caughtUp();

    expect(delivered.map((m) => m.messageId)).toEqual([a.id]);
    expect(lines.filter((l) => l.level === 40)).toEqual([expect.objectContaining({ posts: [huge.id] })]);
    // The next catch-up starts after it: the post is not read (and warned about) again.
    // The newest alone is over the bound and no cursor names it yet: the post after it (by
    // offset) does. Forwards, a's cursor names it.
    expect(reads({ a, old, huge })).toEqual([...halving('newest'), 'newest 1 page 1', 'before a 200', ...halving('after old'), 'after huge 200']);
    await cursorIs(huge);
  });
});
