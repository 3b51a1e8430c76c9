import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { withTempDir } from '../helpers/fixtures.js';
import { telegramChannel, telegramEnv, withTelegram } from '../helpers/platforms.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { scaled } from '../helpers/timing.js';
import { echoAgent } from '../helpers/toml.js';
import { killRecordedDaemonAtEnd, pidOf, pollHealth, stopPid } from '../helpers/upgrade.js';

describe('SIGUSR2, real processes', () => {
  it(
    '`kill -USR2 <pid>` upgrades as `channeld upgrade` does: a new pid, the old exits 0, /healthz never refused, messages before and after answered once',
    async () => {
      const tg = await withTelegram();
      const dir = withTempDir('upgrade-usr2');
      const file = writeProcessConfig(dir, `${echoAgent(0)}${telegramChannel(tg)}`);
      const old = withDaemonProcess(file, telegramEnv(tg));
      killRecordedDaemonAtEnd(dir);
      const url = await old.url();
      await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, 15_000);
      const oldPid = old.child.pid!;
      expect(pidOf(dir)).toBe(oldPid);

      const health = pollHealth(url);
      tg.dm('before the signal');
      await waitFor(() => tg.texts(42).includes('before the signal'), 15_000);

      old.signal('SIGUSR2');
      expect(await old.exited).toBe(0);
      const newPid = pidOf(dir);
      expect(newPid).not.toBe(oldPid);
      // 'exit' can come before the last of the old process's asynchronous log writes has been
      // read off the pipe (which the new process, inheriting it, keeps open): wait for the lines.
      await waitFor(() => old.lines.some((l) => l.msg === 'SIGUSR2: upgrading to the new build'), 10_000);
      await waitFor(() => old.lines.some((l) => l.msg === 'upgrade: handed over to the new process' && l.childPid === newPid), 10_000);

      tg.dm('after the signal');
      await waitFor(() => tg.texts(42).includes('after the signal'), 15_000);
      await waitFor(() => tg.pendingUpdates === 0);
      const { polls, failed } = await health.stop();
      expect(failed).toEqual([]);
      expect(polls).toBeGreaterThan(1);
      expect(tg.texts(42)).toEqual(['before the signal', 'after the signal']);
      expect(tg.callsOf('sendMessage')).toHaveLength(2);
      await stopPid(newPid);
    },
    scaled(60_000),
  );
});
