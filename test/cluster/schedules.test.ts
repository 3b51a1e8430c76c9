import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { clusterSkipReason } from '../helpers/cluster.js';
import { type Member, ProcessCluster } from './harness.js';

const skip = await clusterSkipReason();

describe.skipIf(skip !== undefined)(`[[schedules]] in cluster mode, two real processes${skip ? ` (skipped: ${skip})` : ''}`, () => {
  let c: ProcessCluster | undefined;
  afterEach(async () => {
    await c?.close();
    c = undefined;
  });

  // Without a timezone croner's own notion of the firing is the clock time its timer ran (a few
  // ms past the second, different on each instance): the key must still be the scheduled second.
  it.each([
    ['with timezone = "UTC"', true],
    ["without a timezone (the daemon's)", false],
  ])('a schedule added by reload on both instances fires once, %s: one stored firing, one turn, one reply', async (_name, utc) => {
    c = new ProcessCluster({ echoDelayMs: 5 });
    await c.start(2);
    // One firing a few seconds ahead (a yearly pattern in UTC; without a timezone an hourly one,
    // so an instance whose zone differs from this process's by whole hours agrees);
    // catch_up = "last" runs it even if a loaded box applies the reload after that second passed.
    const at = new Date(Date.now() + 5000);
    const cron = utc
      ? `${at.getUTCSeconds()} ${at.getUTCMinutes()} ${at.getUTCHours()} ${at.getUTCDate()} ${at.getUTCMonth() + 1} *`
      : `${at.getSeconds()} ${at.getMinutes()} * * * *`;
    const zone = utc ? 'timezone = "UTC"\n' : '';
    const table = `\n[[schedules]]\nid = "daily"\nchannel = "tg"\nchat = "4242"\ncron = "${cron}"\n${zone}prompt = "time for the report"\ncatch_up = "last"\n`;
    for (const m of c.live()) {
      appendFileSync(join(c.dir, `${m.id}.toml`), table);
      m.proc.signal('SIGHUP');
    }
    // Both instances fire it (each stores the firing, or finds it stored).
    const fired = (m: Member) => m.proc.lines.some((l) => l.msg === 'schedule fired' && l.schedule === 'daily');
    await waitFor(() => c!.live().every(fired), 60_000, 50);
    await waitFor(() => c!.tg.messages.some((m) => m.chatId === 4242 && m.text === 'time for the report'), 30_000, 50);
    // Nothing else runs or waits anywhere: the one reply is all there is.
    await waitFor(async () => (await Promise.all(c!.live().map((m) => c!.status(m)))).every((s) => s.turns.in_flight === 0), 30_000, 50);
    expect(c.tg.messages.filter((m) => m.chatId === 4242)).toHaveLength(1);
    // Log lines reach stdout up to 100 ms after they are written (the logger buffers its writes):
    // wait for the turn's line, then every instance has settled and there is only the one.
    const turns = () => c!.live().flatMap((m) => m.proc.lines.filter((l) => l.msg === 'turn finished' && l.scope === 'tg:4242'));
    await waitFor(() => turns().length > 0, 10_000, 50);
    expect(turns()).toHaveLength(1);
  });
});
