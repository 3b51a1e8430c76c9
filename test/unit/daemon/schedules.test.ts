import { afterEach, describe, expect, it } from 'vitest';
import { type ScheduleConfig, scheduleSchema } from '../../../src/config/schedules.js';
import { ScheduleRunner } from '../../../src/daemon/schedules.js';
import { CodedError } from '../../../src/contracts/errors.js';
import { waitFor } from '../../helpers/daemon.js';
import { quietLogger } from '../../helpers/cluster.js';
import { withPipeline } from '../../helpers/pipeline.js';

/** A six-field pattern (seconds first) matching only the local second `atMs` falls in: one firing. */
function onceAt(atMs: number): string {
  const d = new Date(atMs);
  return `${d.getSeconds()} ${d.getMinutes()} ${d.getHours()} ${d.getDate()} ${d.getMonth() + 1} *`;
}

describe('[[schedules]] firings and their inbox key', () => {
  const runners: ScheduleRunner[] = [];
  afterEach(() => {
    for (const r of runners.splice(0)) r.close();
  });

  it('a live firing without a timezone and the catch-up of it after a restart are one inbox item: one turn, one reply', async () => {
    // The real intake: the dispatcher storing into a SQLite inbox, an echo agent answering.
    const p = withPipeline('[agent]\nprovider = "echo"\necho_delay_ms = 5\n');
    const { log } = quietLogger();
    const s: ScheduleConfig = { id: 'tick', channel: 't', chat: 'c1', cron: onceAt(Date.now() + 1500), prompt: 'tick tock', catch_up: 'last' };
    const delivered: string[] = [];
    const runner = () => {
      const r = new ScheduleRunner(
        async (m) => {
          const stored = await p.dispatcher.deliver(m);
          delivered.push(m.messageId);
          return stored;
        },
        log,
        () => {},
      );
      runners.push(r);
      return r;
    };
    const rows = () => (p.db.prepare('SELECT COUNT(*) AS n FROM inbox').get() as { n: number }).n;

    const first = runner();
    first.apply([s], 3_600_000);
    await waitFor(() => delivered.length === 1, 10_000);
    first.close();
    // The key is the scheduled second, whole, as any other instance and the catch-up compute it.
    expect(Number(delivered[0]!.split(':').pop()) % 1000).toBe(0);
    await waitFor(() => p.adapter.visible('c1').length === 1, 10_000);

    // The restart (or a reload changing the table): catch_up = "last" fires that same firing again.
    runner().apply([s], 3_600_000);
    await waitFor(() => delivered.length === 2, 10_000);
    expect(delivered[1]).toBe(delivered[0]);
    expect(rows()).toBe(1);
    expect((await p.metrics.duplicates.get()).values.reduce((n, v) => n + v.value, 0)).toBe(1);
    expect(p.adapter.visible('c1')).toEqual(['tick tock']);
  });

  it('a firing whose channel is not registered yet (a start, a reload adding both) is tried again, not skipped', async () => {
    const { log } = quietLogger();
    const outcomes: string[] = [];
    let tries = 0;
    const s: ScheduleConfig = { id: 'early', channel: 't', chat: 'c1', cron: onceAt(Date.now() - 2000), prompt: 'hello', catch_up: 'last' };
    const r = new ScheduleRunner(
      async () => {
        if (++tries < 3) throw new CodedError('CHANNEL_UNKNOWN', 'channel "t" is not taking messages');
        return true;
      },
      log,
      () => {},
      (o) => outcomes.push(o),
      10,
    );
    runners.push(r);
    r.apply([s], 3_600_000);
    await waitFor(() => outcomes.length === 1, 10_000);
    // Before: skipped at the first refusal.
    expect(outcomes).toEqual(['caught_up']);
    expect(tries).toBe(3);
  });
});

describe('[[schedules]] patterns', () => {
  const cronIssues = (cron: string) =>
    scheduleSchema.safeParse({ id: 'a', channel: 't', chat: 'c1', cron, prompt: 'p' }).error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`) ?? [];

  it('a pattern firing more than once a minute is refused on its cron key, whatever the other fields; one second a minute passes', () => {
    expect(cronIssues('* * * * * *')).toEqual([expect.stringMatching(/^cron: fires 60 times a minute \(its seconds field is "\*"\).*"0 \* \* \* \* \*"$/)]);
    expect(cronIssues('0,30 0 9 * * 1-5')).toEqual([expect.stringMatching(/^cron: fires 2 times a minute .*"0 0 9 \* \* 1-5"$/)]);
    expect(cronIssues('5-6 0 0 1 1 *')).toEqual([expect.stringMatching(/^cron: fires 2 times a minute/)]);
    for (const ok of ['0 9 * * 1-5', '* * * * *', '30 * * * * *', '59 0 12 * * *', '@hourly']) expect(cronIssues(ok)).toEqual([]);
    expect(cronIssues('61 * * * *')).toEqual([expect.stringMatching(/^cron: not a cron pattern/)]);
  });
});
