import type { JsMsg } from '@nats-io/jetstream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { CHANNEL_WAIT_MAX_MS, MAX_WAITING_PER_PARTITION, type Received, WaitingForChannel } from '../../../src/cluster/waiting-channels.js';
import { LogSink, waitFor } from '../../helpers/daemon.js';

/** A received item as the partition consumer hands it over: only its store time and term() are read here. */
function received(channelId: string, n: number, storedAtMs: number, termed: string[]): Received {
  const m = { time: new Date(storedAtMs), term: () => termed.push(`${channelId}:${n}`) } as unknown as JsMsg;
  const message = { channelId, messageId: String(n) } as Received['item']['message'];
  return { m, item: { scope: `${channelId}:u`, message, passive: [] }, replyRefs: [] };
}

/** A balancing step whose admission queues each ready item at once: what it queued, in order. */
async function take(w: WaitingForChannel, known: (channelId: string) => boolean, nowMs: number): Promise<Received[]> {
  const queued: Received[] = [];
  await w.admitReady(known, nowMs, async (r, claim) => {
    if (claim()) queued.push(r);
    return true;
  });
  return queued;
}

describe('items waiting for a channel this instance does not run (cluster)', () => {
  it('a later item of a waiting channel waits too; they come out in order once the channel runs here', async () => {
    const logs = new LogSink();
    const w = new WaitingForChannel(3, pino(logs));
    const termed: string[] = [];
    const now = Date.now();
    w.add(received('new', 1, now, termed), now);
    expect(w.holds('new', true)).toBe(true);
    expect(w.holds('old', true)).toBe(false);
    w.add(received('new', 2, now, termed), now);
    expect(await take(w, () => false, now)).toEqual([]);
    expect((await take(w, (id) => id === 'new', now)).map((r) => r.item.message.messageId)).toEqual(['1', '2']);
    expect(w.size).toBe(0);
    expect(w.holds('new', true)).toBe(false);
    // Warned once for the channel, not per item.
    expect(logs.entries().filter((l) => String(l.msg).startsWith('messages wait'))).toHaveLength(1);
  });

  it('bounded: past the partition cap an item is let go, and one waiting past the age limit is dropped', async () => {
    const logs = new LogSink();
    const w = new WaitingForChannel(0, pino(logs));
    const termed: string[] = [];
    const now = Date.now();
    for (let i = 0; i < MAX_WAITING_PER_PARTITION + 1; i++) w.add(received('x', i, now, termed), now);
    expect(w.size).toBe(MAX_WAITING_PER_PARTITION);
    expect(termed).toEqual([`x:${MAX_WAITING_PER_PARTITION}`]);
    expect(await take(w, () => false, now + CHANNEL_WAIT_MAX_MS + 1)).toEqual([]);
    expect(w.size).toBe(0);
    expect(termed).toHaveLength(MAX_WAITING_PER_PARTITION + 1);
    expect(logs.entries().filter((l) => l.level === 50)).toHaveLength(MAX_WAITING_PER_PARTITION + 1);
  });

  it('an item of a channel that runs here now, held only behind earlier ones, is never let go by the cap', async () => {
    const w = new WaitingForChannel(0, pino(new LogSink()));
    const termed: string[] = [];
    const now = Date.now();
    for (let i = 0; i < MAX_WAITING_PER_PARTITION; i++) w.add(received('x', i, now, termed), now);
    // A reload just added x: the next item of x waits behind the others until the next step.
    expect(w.holds('x', true)).toBe(true);
    w.add(received('x', MAX_WAITING_PER_PARTITION, now, termed), now, true);
    expect(termed).toEqual([]);
    expect(await take(w, () => true, now)).toHaveLength(MAX_WAITING_PER_PARTITION + 1);
  });

  it('counts per channel, and a /stop takes out only its conversation, the others keeping their order', async () => {
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
    expect((await take(w, () => true, now)).map((r) => r.item.message.messageId)).toEqual(['2', '3']);
    expect(w.byChannel().size).toBe(0);
  });

  it('items whose admission is still reading their conversation state stay counted, and a /stop then takes them: they are not queued', async () => {
    const w = new WaitingForChannel(0, pino(new LogSink()));
    const termed: string[] = [];
    const now = Date.now();
    const other = received('x', 3, now, termed);
    w.add(received('x', 1, now, termed), now);
    w.add(received('x', 2, now, termed), now);
    w.add({ ...other, item: { ...other.item, scope: 'x:v' } }, now);
    // As Partitions admits one: the conversation's state is read (PostgreSQL), then it is queued if still there.
    const reads: Array<() => void> = [];
    const queued: string[] = [];
    const step = w.admitReady(
      () => true,
      now,
      async (r, claim) => {
        await new Promise<void>((resolve) => reads.push(resolve));
        if (claim()) queued.push(r.item.message.messageId);
        return true;
      },
    );
    // The first read stays pending: before, every ready item was out of the list by now, neither
    // waiting nor queued, so /status showed none and a /stop answered "Nothing to stop.".
    expect(reads).toHaveLength(1);
    expect(w.size).toBe(3);
    expect(Object.fromEntries(w.byChannel())).toEqual({ x: 3 });
    expect(w.takeScope('x:u').map((r) => r.item.message.messageId)).toEqual(['1', '2']);
    expect(Object.fromEntries(w.byChannel())).toEqual({ x: 1 });
    reads.shift()!();
    // The stopped ones are not queued (the /stop recorded and acked them); no read for the second.
    await waitFor(() => reads.length === 1);
    reads.shift()!();
    await step;
    expect(queued).toEqual(['3']);
    expect(w.size).toBe(0);
    expect(w.byChannel().size).toBe(0);
    expect(termed).toEqual([]);
  });

  it('a step given up (the partition leaves) leaves the items not queued yet waiting, counted', async () => {
    const w = new WaitingForChannel(0, pino(new LogSink()));
    const termed: string[] = [];
    const now = Date.now();
    for (const n of [1, 2, 3]) w.add(received('x', n, now, termed), now);
    const queued: string[] = [];
    await w.admitReady(
      () => true,
      now,
      async (r, claim) => {
        if (r.item.message.messageId === '2') return false;
        if (claim()) queued.push(r.item.message.messageId);
        return true;
      },
    );
    expect(queued).toEqual(['1']);
    expect(w.size).toBe(2);
    expect(w.takeScope('x:u').map((r) => r.item.message.messageId)).toEqual(['2', '3']);
  });
});
