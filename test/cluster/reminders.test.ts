import { afterEach, describe, expect, it } from 'vitest';
import { clusterSkipReason } from '../helpers/cluster.js';
import { waitFor } from '../helpers/daemon.js';
import { type ClusterStatusJson, type Member, ProcessCluster } from './harness.js';

const skip = await clusterSkipReason();
const ADA = { id: 4343, first_name: 'Ada' };

type WithReminders = ClusterStatusJson & { reminders?: { pending: number; next_fire_at: string | null } };

describe.skipIf(skip !== undefined)(`reminders in cluster mode, two real processes${skip ? ` (skipped: ${skip})` : ''}`, () => {
  let c: ProcessCluster | undefined;
  afterEach(async () => {
    await c?.close();
    c = undefined;
  });

  it('a reminder set through one instance is seen by both (PostgreSQL) and posts once: one claimed firing, one reply', async () => {
    c = new ProcessCluster({ echoDelayMs: 5 });
    await c.start(2);
    const status = async (m: Member) => (await c!.status(m)) as WithReminders;
    const texts = () => c!.tg.messages.filter((m) => m.chatId === ADA.id).map((m) => m.text);
    c.tg.dm('/remind in 12s stand up', ADA);
    await waitFor(() => texts().some((t) => t.startsWith('Reminder 1 set for ')), 30_000, 50);
    // Both instances read the one shared table: each arms its timer for the same firing.
    const seen = new Set<string>();
    await waitFor(
      async () => {
        for (const m of c!.live()) if ((await status(m)).reminders?.pending === 1) seen.add(m.id);
        return seen.size === 2 || texts().some((t) => t.startsWith('⏰'));
      },
      30_000,
      100,
    );
    expect([...seen].sort()).toEqual(['p0', 'p1']);

    await waitFor(() => texts().includes('⏰ @Ada: stand up'), 60_000, 50);
    await waitFor(async () => (await Promise.all(c!.live().map(status))).every((s) => s.reminders?.pending === 0), 30_000, 100);
    c.tg.dm('/reminders', ADA);
    await waitFor(() => texts().includes('No reminders in this conversation.'), 30_000, 50);
    // One instance claimed and fired it; the other found nothing due to take.
    expect(texts().filter((t) => t.startsWith('⏰'))).toHaveLength(1);
    const fired = c.live().flatMap((m) => m.proc.lines.filter((l) => l.msg === 'reminder fired'));
    expect(fired).toHaveLength(1);
  });
});
