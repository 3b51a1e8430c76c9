import type { JsMsg } from '@nats-io/jetstream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { CHANNEL_WAIT_MAX_MS, MAX_WAITING_PER_PARTITION, type Received, WaitingForChannel } from '../../../src/cluster/waiting-channels.js';
import { LogSink } from '../../helpers/daemon.js';

/** A received item as the partition consumer hands it over: only its store time and term() are read here. */
function received(channelId: string, n: number, storedAtMs: number, termed: string[]): Received {
  const m = { time: new Date(storedAtMs), term: () => termed.push(`${channelId}:${n}`) } as unknown as JsMsg;
  const message = { channelId, messageId: String(n) } as Received['item']['message'];
  return { m, item: { scope: `${channelId}:u`, message, passive: [] }, replyRefs: [] };
}

describe('items waiting for a channel this instance does not run (cluster)', () => {
  it('a later item of a waiting channel waits too; they come out in order once the channel runs here', () => {
    const logs = new LogSink();
    const w = new WaitingForChannel(3, pino(logs));
    const termed: string[] = [];
    const now = Date.now();
    w.add(received('new', 1, now, termed), now);
    expect(w.holds('new', true)).toBe(true);
    expect(w.holds('old', true)).toBe(false);
    w.add(received('new', 2, now, termed), now);
    expect(w.take(() => false, now)).toEqual([]);
    expect(w.take((id) => id === 'new', now).map((r) => r.item.message.messageId)).toEqual(['1', '2']);
    expect(w.size).toBe(0);
    expect(w.holds('new', true)).toBe(false);
    // Warned once for the channel, not per item.
    expect(logs.entries().filter((l) => String(l.msg).startsWith('messages wait'))).toHaveLength(1);
  });

  it('bounded: past the partition cap an item is let go, and one waiting past the age limit is dropped', () => {
    const logs = new LogSink();
    const w = new WaitingForChannel(0, pino(logs));
    const termed: string[] = [];
    const now = Date.now();
    for (let i = 0; i < MAX_WAITING_PER_PARTITION + 1; i++) w.add(received('x', i, now, termed), now);
    expect(w.size).toBe(MAX_WAITING_PER_PARTITION);
    expect(termed).toEqual([`x:${MAX_WAITING_PER_PARTITION}`]);
    expect(w.take(() => false, now + CHANNEL_WAIT_MAX_MS + 1)).toEqual([]);
    expect(w.size).toBe(0);
    expect(termed).toHaveLength(MAX_WAITING_PER_PARTITION + 1);
    expect(logs.entries().filter((l) => l.level === 50)).toHaveLength(MAX_WAITING_PER_PARTITION + 1);
  });

  it('an item of a channel that runs here now, held only behind earlier ones, is never let go by the cap', () => {
    const w = new WaitingForChannel(0, pino(new LogSink()));
    const termed: string[] = [];
    const now = Date.now();
    for (let i = 0; i < MAX_WAITING_PER_PARTITION; i++) w.add(received('x', i, now, termed), now);
    // A reload just added x: the next item of x waits behind the others until the next step.
    expect(w.holds('x', true)).toBe(true);
    w.add(received('x', MAX_WAITING_PER_PARTITION, now, termed), now, true);
    expect(termed).toEqual([]);
    expect(w.take(() => true, now)).toHaveLength(MAX_WAITING_PER_PARTITION + 1);
  });

  it('counts per channel, and a /stop takes out only its conversation, the others keeping their order', () => {
    const w = new WaitingForChannel(0, pino(new LogSink()));
    const termed: string[] = [];
    const now = Date.now();
    const other = (n: number) => {
      const r = received('x', n, now, termed);
      return { ...r, item: { ...r.item, scope: 'x:v' } };
    };
    w.add(received('x', 1, now, termed), now);
    w.add(other(2), now);
    w.add(received('y', 3, now, termed), now);
    w.add(received('x', 4, now, termed), now);
    expect(Object.fromEntries(w.byChannel())).toEqual({ x: 3, y: 1 });
    expect(w.takeScope('x:u').map((r) => r.item.message.messageId)).toEqual(['1', '4']);
    expect(w.takeScope('x:u')).toEqual([]);
    expect(Object.fromEntries(w.byChannel())).toEqual({ x: 1, y: 1 });
    expect(termed).toEqual([]);
    expect(w.take(() => true, now).map((r) => r.item.message.messageId)).toEqual(['2', '3']);
    expect(w.byChannel().size).toBe(0);
  });
});
