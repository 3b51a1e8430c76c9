import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startDaemon, waitFor, type TestDaemon } from '../../helpers/daemon.js';
import { echoAgent, webchatChannel } from '../../helpers/toml.js';
import { gone } from '../../helpers/upgrade.js';

/** Stand-ins for the new build: one says ready at once, one never does; both record their pid and end when the old process lets go. */
const script = (ready: boolean) => `
require('node:fs').writeFileSync(process.env.CHANNELD_TEST_CHILD_PID, String(process.pid));
const keep = setInterval(() => {}, 60000);
const end = () => { clearInterval(keep); process.exit(0); };
process.on('SIGTERM', end);
process.on('disconnect', end);
${ready ? "process.send({ t: 'ready' });" : ''}
`;

describe('upgrade: a reload in the old process', () => {
  const cleanup: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  async function setup(ready: boolean): Promise<{ t: TestDaemon; exec: string; childPid: () => number }> {
    const dir = mkdtempSync(join(tmpdir(), 'channeld-upgrade-reload-'));
    const exec = join(dir, 'child.cjs');
    writeFileSync(exec, script(ready));
    const pidFile = join(dir, 'child.pid');
    const before = process.env.CHANNELD_TEST_CHILD_PID;
    process.env.CHANNELD_TEST_CHILD_PID = pidFile;
    const childPid = () => {
      try {
        return Number(readFileSync(pidFile, 'utf8'));
      } catch {
        return 0;
      }
    };
    const t = await startDaemon(`${echoAgent(0)}${webchatChannel('web')}`);
    const predecessor = t.daemon.upgrade.predecessor;
    cleanup.push(async () => {
      await t.stop();
      await predecessor.finish();
      const pid = childPid();
      if (pid && !gone(pid)) process.kill(pid, 'SIGKILL');
      if (before === undefined) delete process.env.CHANNELD_TEST_CHILD_PID;
      else process.env.CHANNELD_TEST_CHILD_PID = before;
      rmSync(dir, { recursive: true, force: true });
    });
    return { t, exec, childPid };
  }

  const added = (t: TestDaemon) => t.rewrite(`${echoAgent(0)}${webchatChannel('web')}\n${webchatChannel('web2')}`);

  // A reload served by the old process while the new one starts replaced a channel's gate
  // (parked for the new process) with one that runs: the listener ran in both processes.
  it('is refused while an upgrade is under way, and applies again once it failed and its listeners run here again', async () => {
    const { t, exec, childPid } = await setup(false);
    const predecessor = t.daemon.upgrade.predecessor;
    const outcome = predecessor.upgrade({ exec });
    await waitFor(childPid);
    added(t);
    const refused = await t.daemon.reload();
    expect(refused).toMatchObject({ ok: false, added: [] });
    expect(refused.errors.join()).toMatch(/upgrade is under way/);
    expect(t.logs.entries().some((e) => e.reload === 'refused')).toBe(true);
    predecessor.stop();
    expect(await outcome).toMatchObject({ ok: false });
    await waitFor(() => predecessor.phase === 'idle');
    expect(await t.daemon.reload()).toMatchObject({ ok: true, added: ['web2'] });
  });

  // An upgrade begun while a reload was being applied handed over the gates replaced so far;
  // a channel the reload loaded after that ran its listener here and in the new process.
  it('an upgrade asked for while a reload is being applied is refused (coded, logged); once it applied, one starts', async () => {
    const { t, exec, childPid } = await setup(false);
    const predecessor = t.daemon.upgrade.predecessor;
    added(t);
    const reloading = t.daemon.reload();
    const refused = await predecessor.upgrade({ exec });
    expect(refused).toMatchObject({ ok: false, code: 'UPGRADE_IN_PROGRESS' });
    expect(refused.error).toMatch(/a reload is being applied/);
    expect(t.logs.entries().some((e) => e.msg === 'upgrade refused' && e.code === 'UPGRADE_IN_PROGRESS')).toBe(true);
    expect(childPid()).toBe(0);
    expect(await reloading).toMatchObject({ ok: true, added: ['web2'] });
    const outcome = predecessor.upgrade({ exec });
    await waitFor(childPid);
    expect(predecessor.phase).toBe('upgrading');
    predecessor.stop();
    expect(await outcome).toMatchObject({ ok: false });
  });

  // After the hand-over a reload reaching the old process started listeners there that its
  // stop never stopped, and answered ok though the process now serving had not reloaded.
  it('is refused once this process handed over', async () => {
    const { t, exec } = await setup(true);
    expect(await t.daemon.upgrade.predecessor.upgrade({ exec })).toMatchObject({ ok: true });
    added(t);
    const refused = await t.daemon.reload();
    expect(refused).toMatchObject({ ok: false, added: [] });
    expect(refused.errors.join()).toMatch(/handed over/);
  });
});
