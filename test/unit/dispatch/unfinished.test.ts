import { afterEach, describe, expect, it, vi } from 'vitest';
import { ChannelError } from '../../../src/contracts/errors.js';
import { openDb } from '../../../src/store/db.js';
import { waitFor } from '../../helpers/daemon.js';
import { pipeline, type Pipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

const rows = (p: Pipeline) => p.db.prepare('SELECT state, error FROM inbox ORDER BY id').all() as Array<{ state: string; error: string | null }>;
/** Every send fails as an unreachable platform does (retryable); returns how many were tried. */
const platformDown = (p: Pipeline) => {
  const tried = { sends: 0 };
  p.adapter.fault = (c) => {
    if (c.op !== 'send') return;
    tried.sends++;
    throw new ChannelError('CHANNEL_NETWORK', 'the platform is unreachable');
  };
  return tried;
};

describe('a turn whose final text did not go out', () => {
  afterEach(() => vi.useRealTimers());

  // A kill -9 at this moment left the item for the next start; a graceful stop recorded it done.
  it('cut by the shutdown (the platform unreachable): left for the next start, not recorded done', async () => {
    // Its own database, which closing the pipeline leaves open to read.
    const db = openDb(':memory:');
    const p = pipeline('[agent]\nprovider = "echo"\n', 'stream_mode = "final"\n', { db });
    const tried = platformDown(p);
    await p.dispatcher.deliver(userMessage('t', 'hello there'));
    await waitFor(() => tried.sends > 0);
    await p.close(100);
    expect(p.logs.text).toContain('the final reply could not be delivered');
    expect(rows(p)).toEqual([{ state: 'pending', error: null }]);
    expect(p.inbox.unfinished()).toHaveLength(1);
    db.close();
  });

  it('past the final deadline (the platform away for minutes): recorded failed, not done', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date', 'setInterval', 'clearInterval'] });
    const p = pipeline('[agent]\nprovider = "echo"\n', 'stream_mode = "final"\n');
    platformDown(p);
    await p.dispatcher.deliver(userMessage('t', 'hello there'));
    for (let i = 0; i < 60 && rows(p)[0]!.state === 'pending'; i++) await vi.advanceTimersByTimeAsync(10_000);
    expect(rows(p)).toEqual([{ state: 'failed', error: 'error' }]);
    vi.useRealTimers();
    await p.close(100);
  });

  // Cluster rebalancing hands a partition over; a turn still running past the grace belongs to
  // the new owner, which finishes the same messages: it was recorded as stopped (and acked).
  it('handed to another owner past the grace: left unfinished, not recorded as stopped', async () => {
    const p = pipeline('[agent]\nprovider = "echo"\necho_delay_ms = 200\n');
    await p.dispatcher.deliver(userMessage('t', 'one two three four five six'));
    await waitFor(() => p.adapter.calls.some((c) => c.op === 'send'));
    await p.dispatcher.release(() => true, 50);
    expect(rows(p)[0]!.state).not.toMatch(/done|failed/);
    await p.close(100);
  });
});

describe('a turn that ended on its own before a hand-over cut it', () => {
  // Its final text was still going out (a 429, the edit floor) when the grace ran out: it is
  // answered, and must be recorded so; left unfinished, the new owner would answer it again.
  it('is recorded done, not left for the new owner', async () => {
    const p = pipeline('[agent]\nprovider = "echo"\n', 'stream_mode = "final"\n');
    const held = p.adapter.hold((c) => c.op === 'send');
    await p.dispatcher.deliver(userMessage('t', 'hello there'));
    await held.reached;
    const released = p.dispatcher.release(() => true, 20);
    // The grace ran out while the final text waited: the turn's signal carries the hand-over.
    await new Promise((r) => setTimeout(r, 60));
    held.release();
    await released;
    await waitFor(() => rows(p)[0]!.state !== 'pending');
    expect(rows(p)).toEqual([{ state: 'done', error: null }]);
    expect(p.adapter.visible('chat-1')).toEqual(['hello there']);
    await p.close(100);
  });
});
