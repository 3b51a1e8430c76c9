import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { catchUpRoom, type MessagesAnswer } from '../../../channels/matrix/catch-up.js';
import { ChannelError } from '../../../src/contracts/errors.js';
import { LogSink } from '../../helpers/daemon.js';

/** A room's gap as /messages pages it (newest first), each event `body` long. */
function gap(count: number, bodyChars: number) {
  const events = Array.from({ length: count }, (_, i) => ({
    type: 'm.room.message',
    event_id: `$e${count - i}`,
    sender: '@alice:fake.test',
    origin_server_ts: Date.now() - i,
    content: { msgtype: 'm.text', body: 'x'.repeat(bodyChars) },
  }));
  return (query: Record<string, string>): MessagesAnswer => {
    const from = Number(query.from);
    const chunk = events.slice(from, from + Number(query.limit));
    return { chunk, start: String(from), ...(from + chunk.length < events.length ? { end: String(from + chunk.length) } : {}) };
  };
}

const options = (read: (q: Record<string, string>, s: AbortSignal) => Promise<MessagesAnswer>, logs: LogSink) => ({
  read,
  roomId: '!busy:fake.test',
  from: '0',
  to: 's1',
  maxEvents: 1000,
  maxBytes: 1024 * 1024,
  notBeforeMs: 0,
  channel: 'mx',
  log: pino(logs),
  signal: AbortSignal.timeout(10_000),
});

describe('Matrix catch-up bounds', () => {
  it("stops at the batch's byte budget, keeping the newest events that fit, with a warning", async () => {
    const logs = new LogSink();
    const pages = gap(300, 10_000);
    const r = await catchUpRoom(options(async (q) => pages(q), logs));
    expect(r.bound).toBe('bytes');
    expect(r.bytes).toBeLessThanOrEqual(1024 * 1024);
    expect(r.events.length).toBeGreaterThan(90);
    expect(r.events.length).toBeLessThan(110);
    // Oldest first, and the newest of the gap among them.
    expect(r.events.at(-1)!.event_id).toBe('$e300');
    expect(logs.entries().some((l) => l.bound === 'bytes')).toBe(true);
  });

  // Before, the walk slept the whole 10 minutes (here: until the signal's 10 s ended it, a rejection).
  it('a 429 asking for longer than 30 s leaves the gap instead of holding the sync loop', async () => {
    const logs = new LogSink();
    const r = await catchUpRoom(
      options(async () => {
        throw new ChannelError('CHANNEL_RATE_LIMITED', 'slow down', { retryAfterMs: 600_000 });
      }, logs),
    );
    expect(r.bound).toBe('refused');
    expect(r.events).toEqual([]);
  });
});
