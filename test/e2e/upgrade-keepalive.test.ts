import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { withTempDir } from '../helpers/fixtures.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { scaled } from '../helpers/timing.js';
import { echoAgent, webchatChannel } from '../helpers/toml.js';
import { killRecordedDaemonAtEnd, pidOf, pollHealth, stopPid } from '../helpers/upgrade.js';

describe('upgrade: clients on keep-alive connections, real processes', () => {
  it(
    'requests sent back to back on kept-alive connections across the hand-over all get an answer: none is cut by the old process closing its connections',
    async () => {
      const dir = withTempDir('upgrade-keepalive');
      const file = writeProcessConfig(dir, `${echoAgent(0)}${webchatChannel()}`);
      const old = withDaemonProcess(file);
      killRecordedDaemonAtEnd(dir);
      const url = await old.url();
      await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, 15_000);
      const oldPid = old.child.pid!;

      // Four connections that are idle only between an answer and the next request.
      const health = pollHealth(url, { intervalMs: 0, loops: 4 });
      old.signal('SIGUSR2');
      expect(await old.exited).toBe(0);
      const newPid = pidOf(dir);
      expect(newPid).not.toBe(oldPid);
      const { polls, failed } = await health.stop();
      expect(failed).toEqual([]);
      expect(polls).toBeGreaterThan(100);
      await stopPid(newPid);
    },
    scaled(60_000),
  );
});
