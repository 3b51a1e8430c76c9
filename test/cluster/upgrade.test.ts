import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { clusterSkipReason } from '../helpers/cluster.js';
import { waitFor } from '../helpers/daemon.js';
import { scaled } from '../helpers/timing.js';
import { gone } from '../helpers/upgrade.js';
import { ProcessCluster, type Member } from './harness.js';

const skip = await clusterSkipReason();

describe.skipIf(skip !== undefined)(`cluster rolling upgrade, real processes${skip ? ` (skipped: ${skip})` : ''}`, () => {
  let c: ProcessCluster | undefined;
  const upgraded: number[] = [];
  afterEach(async () => {
    // The new processes are not the test's children: stop them by pid.
    for (const pid of upgraded.splice(0))
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
    await c?.close();
    c = undefined;
  });

  it(
    'SIGUSR2 on each instance in turn: the new process joins as an instance of its own; the Telegram lease stays while its owner runs and moves only after it handed over; every message answered once',
    async () => {
      c = new ProcessCluster({ echoDelayMs: 0, defaultInstanceIds: true, leaseTtlMs: 2000 });
      await c.start(2);
      const status = (m: Member) => c!.status(m);
      const ownerSeenBy = async (m: Member) => (await status(m)).cluster.leases.find((l) => l.key === 'listener.tg' && !l.expired)?.owner;
      const ownerId = await waitFor(() => ownerSeenBy(c!.members[0]!), 15_000);
      const ids = await Promise.all(c.members.map(async (m) => (await status(m)).cluster.instance));
      const keep = c.members[ids.indexOf(ownerId)]!;
      const target = c.members[1 - ids.indexOf(ownerId)]!;
      const targetOldId = ids[1 - ids.indexOf(ownerId)]!;

      c.tg.dm('before the rolling upgrade');
      await waitFor(() => c!.tg.texts(42).includes('before the rolling upgrade'), 15_000);

      // Watch the lease from the instance that keeps it, until the upgrade is over (not from
      // the one being upgraded: a request on a kept-alive connection its old process closes
      // at the hand-over fails, as HTTP allows).
      const owners = new Set<string | undefined>();
      let watching = true;
      const watch = (async () => {
        while (watching) {
          owners.add(await ownerSeenBy(keep).catch(() => 'status failed'));
          await new Promise((r) => setTimeout(r, 50));
        }
      })();
      target.proc.signal('SIGUSR2');
      expect(await target.proc.exited).toBe(0);
      const newPid = Number(readFileSync(join(c.dir, target.id, 'channeld.pid'), 'utf8').trim());
      upgraded.push(newPid);
      expect(newPid).not.toBe(target.proc.child.pid);
      // The new process joined as an instance of its own (default id: host and pid); the old one left.
      await waitFor(async () => {
        const s = await status(keep);
        const alive = s.cluster.instances.filter((i) => i.alive).map((i) => i.id);
        return alive.length === 2 && !alive.includes(targetOldId) && alive.some((id) => id.endsWith(`-${newPid}`));
      }, 30_000);
      watching = false;
      await watch;
      expect([...owners]).toEqual([ownerId]);

      c.tg.dm('after the rolling upgrade');
      await waitFor(() => c!.tg.texts(42).includes('after the rolling upgrade'), 15_000);
      await waitFor(() => c!.tg.pendingUpdates === 0);
      expect(c.tg.texts(42)).toEqual(['before the rolling upgrade', 'after the rolling upgrade']);

      // Then the instance with the listener: the lease moves, but only once its old process
      // handed over (stopped its listeners and left), not while it still polls.
      const seen: Array<{ at: number; owner: string | undefined }> = [];
      const ownerNow = async () => (await status(target)).cluster.leases.find((l) => l.key === 'listener.tg' && !l.expired)?.owner;
      watching = true;
      const watch2 = (async () => {
        while (watching) {
          seen.push({ at: Date.now(), owner: await ownerNow().catch(() => 'status failed') });
          await new Promise((r) => setTimeout(r, 50));
        }
      })();
      keep.proc.signal('SIGUSR2');
      expect(await keep.proc.exited).toBe(0);
      const keepNewPid = Number(readFileSync(join(c.dir, keep.id, 'channeld.pid'), 'utf8').trim());
      upgraded.push(keepNewPid);
      await waitFor(async () => {
        const o = await ownerNow();
        seen.push({ at: Date.now(), owner: o });
        return o !== undefined && o !== ownerId;
      }, 30_000);
      watching = false;
      await watch2;
      const handedOverAt = keep.proc.lines.find((l) => l.msg === 'upgrade: handed over to the new process')?.time as number;
      expect(handedOverAt).toBeGreaterThan(0);
      const movedAt = seen.find((e) => e.owner !== ownerId && e.owner !== undefined && e.owner !== 'status failed')!.at;
      expect(movedAt).toBeGreaterThanOrEqual(handedOverAt);
      expect(seen.some((e) => e.owner === 'status failed')).toBe(false);
      c.tg.dm('after the second upgrade');
      await waitFor(() => c!.tg.texts(42).includes('after the second upgrade'), 15_000);
      await waitFor(() => c!.tg.pendingUpdates === 0);
      expect(c.tg.texts(42)).toEqual(['before the rolling upgrade', 'after the rolling upgrade', 'after the second upgrade']);
      for (const pid of [newPid, keepNewPid]) process.kill(pid, 'SIGTERM');
      await waitFor(() => gone(newPid) && gone(keepNewPid), 15_000);
    },
    scaled(90_000),
  );
});
