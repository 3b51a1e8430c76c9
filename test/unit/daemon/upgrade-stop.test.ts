import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it, onTestFailed } from 'vitest';
import type { Daemon } from '../../../src/daemon/daemon.js';
import { untilSignalled } from '../../../src/daemon/signals.js';
import type { ChannelAdapter } from '../../../src/contracts/channel.js';
import { ListenerGate } from '../../../src/daemon/upgrade/listeners.js';
import { Predecessor } from '../../../src/daemon/upgrade/predecessor.js';
import { createLogger } from '../../../src/observe/logger.js';
import { LogSink, waitFor } from '../../helpers/daemon.js';
import { gone, NEVER_READY, READY, standInChild } from '../../helpers/upgrade.js';

describe('upgrade: the old process stops, or cannot start the new build', () => {
  const cleanup: Array<() => void> = [];
  afterEach(() => {
    for (const c of cleanup.splice(0).reverse()) c();
  });

  function setup(timeoutMs = 60_000) {
    const child = standInChild('channeld-upgrade-stop-', { 'never-ready.cjs': NEVER_READY, 'ready.cjs': READY });
    cleanup.push(child.cleanup);
    const { childPid, pidFile, fd } = child;
    const [script, ready] = [child.script('never-ready.cjs'), child.script('ready.cjs')];
    const sink = new LogSink();
    let tracking = 0;
    let recoveries = 0;
    const notified: string[][] = [];
    const predecessor = new Predecessor({
      log: createLogger({ level: 'debug', destination: sink, pretty: false }),
      timeoutMs: () => timeoutMs,
      http: { listeningFd: () => fd, stopAccepting: () => {}, drained: async () => {} },
      freeze: () => [],
      watchStored: () => {
        tracking++;
        return () => (tracking--, 0);
      },
      notify: async (fields) => void notified.push(fields),
      onRecovered: () => void recoveries++,
    });
    return { predecessor, script, ready, sink, childPid, pidFile, notified, tracking: () => tracking, recoveries: () => recoveries };
  }

  // A SIGTERM before the new process was ready never stopped it: once the old process had
  // exited it took over, an orphan outside the service manager; and an upgrade asked for
  // after the SIGTERM started in the stopping daemon.
  it('SIGTERM while the new process is not ready fails the upgrade and stops that process; no upgrade starts after it', async () => {
    const { predecessor, script, childPid, pidFile, recoveries } = setup();
    let stops = 0;
    const daemon = {
      log: createLogger({ level: 'silent' }),
      upgrade: { predecessor },
      stop: async () => void stops++,
      abortNow: () => {},
    } as unknown as Daemon;
    const exited = untilSignalled(daemon);
    const outcome = predecessor.upgrade({ exec: script });
    // Read once: the file goes with the test's directory, and a failure report runs after that.
    const pid = await waitFor(childPid);
    // Whether the pid still runs, is a zombie, or is another program now (pid_max may be 32768).
    onTestFailed(() => {
      for (const f of ['status', 'cmdline'])
        try {
          console.log(`/proc/${pid}/${f}:`, readFileSync(`/proc/${pid}/${f}`, 'utf8').replaceAll('\0', ' ').split('\n').slice(0, 4).join(' | '));
        } catch (err) {
          console.log(`/proc/${pid}/${f}:`, String(err));
        }
    });
    process.emit('SIGTERM', 'SIGTERM');
    expect(await exited).toBe(0);
    expect(stops).toBe(1);
    const r = await outcome;
    expect(r).toMatchObject({ ok: false, code: 'UPGRADE_FAILED', pid });
    expect(r.error).toMatch(/stopping/);
    // Told before its channel closes, so it does not take the close for this process gone.
    const got = await waitFor(() => {
      try {
        return readFileSync(`${pidFile}.got`, 'utf8');
      } catch {
        return '';
      }
    });
    expect(got).toBe('{"t":"abort"}\n');
    await waitFor(() => gone(pid));
    // Told once it is gone: the run files are this process's again (pidfile.ts).
    await waitFor(() => recoveries() === 1);
    expect(await predecessor.upgrade({ exec: script })).toMatchObject({ ok: false, code: 'DAEMON_SHUTTING_DOWN' });
  });

  // spawn throws at once on some arguments (a NUL byte in the path, EBADF): the daemon
  // crashed on SIGUSR2 (an uncaught exception) and the admissions tracked for the upgrade
  // were never let go (the set grew with every message).
  it('a spawn that throws fails the upgrade cleanly and tracks nothing', async () => {
    const { predecessor, sink, tracking } = setup();
    const r = await predecessor.upgrade({ exec: '/opt/channeld/bad\0name.sh' });
    expect(r).toMatchObject({ ok: false, code: 'UPGRADE_FAILED' });
    expect(r.error).toMatch(/cannot start/);
    expect(tracking()).toBe(0);
    expect(sink.entries().some((e) => e.msg === 'upgrade failed: the new process was stopped, this one carries on')).toBe(true);
    await waitFor(() => predecessor.phase === 'idle');
  });

  // At the hand-over the listeners the new process never asked for are stopped here; one
  // whose adapter's handoverState threw was an unhandled rejection (`void gate.pause()`), or
  // an exception thrown in the IPC message handler for one that overlapped: both fatal.
  it("an adapter whose handoverState throws costs its state, not the daemon; the logs name the new process's pid childPid", async () => {
    const { predecessor, ready, sink, childPid } = setup();
    const throwing = (id: string, extra: Partial<ChannelAdapter> = {}) =>
      ({
        id,
        listen: async () => {},
        handoverState: () => {
          throw new Error('no state');
        },
        ...extra,
      }) as unknown as ChannelAdapter;
    predecessor.gates.set('gw', new ListenerGate(throwing('gw'), 'handOver'));
    predecessor.gates.set('sock', new ListenerGate(throwing('sock', { upgradeOverlap: true }), 'overlap'));
    const r = await predecessor.upgrade({ exec: ready });
    expect(r).toMatchObject({ ok: true, pid: childPid() });
    await waitFor(() => sink.entries().filter((e) => e.msg === 'upgrade: a listener could not hand its state over').length === 2);
    const handed = sink.entries().find((e) => e.msg === 'upgrade: handed over to the new process')!;
    expect(handed).toMatchObject({ pid: process.pid, childPid: childPid() });
    await predecessor.finish();
    await waitFor(() => gone(childPid()));
  });

  it('a failed upgrade logs the new process as childPid', async () => {
    const { predecessor, script, sink } = setup(200);
    const r = await predecessor.upgrade({ exec: script });
    expect(r).toMatchObject({ ok: false, pid: expect.any(Number) });
    const failed = sink.entries().find((e) => e.msg === 'upgrade failed: the new process was stopped, this one carries on')!;
    expect(failed).toMatchObject({ pid: process.pid, childPid: r.pid });
    await waitFor(() => gone(r.pid!));
  });

  // systemd's main process is the old one until the new one's own MAINPID= arrives, which
  // it sends after `frozen`: an old process that exited first had the unit counted stopped.
  it('the old process tells systemd the new main pid before it lets go, after a successful hand-over only', async () => {
    const { predecessor, ready, notified, childPid } = setup();
    await predecessor.finish();
    expect(notified).toEqual([]);
    expect(await predecessor.upgrade({ exec: ready })).toMatchObject({ ok: true });
    expect(notified).toEqual([]);
    await predecessor.finish();
    expect(notified).toEqual([[`MAINPID=${childPid()}`]]);
    await waitFor(() => gone(childPid()));
  });
});
