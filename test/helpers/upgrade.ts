import { EventEmitter } from 'node:events';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { onTestFinished } from 'vitest';
import type { ToOld } from '../../src/daemon/upgrade/protocol.js';
import { Successor } from '../../src/daemon/upgrade/successor.js';
import { waitFor } from './daemon.js';
import { scaled } from './timing.js';

/** The pid the running daemon recorded in its state_dir. */
export const pidOf = (dir: string): number => Number(readFileSync(join(dir, 'state', 'channeld.pid'), 'utf8').trim());

/** Kills whatever daemon the state_dir names when the test ends (the new process is not the test's child). */
export function killRecordedDaemonAtEnd(dir: string): void {
  onTestFinished(() => {
    try {
      process.kill(pidOf(dir), 'SIGKILL');
    } catch {}
  });
}

/**
 * Whether process `pid` is gone: no such process, or one that has exited and waits only for
 * its parent to reap it (a zombie, state Z in /proc: signal 0 still reaches it).
 */
export function gone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  try {
    return /^\d+ \(.*\) Z/s.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true;
  }
}

/** Stops the daemon process `pid` (SIGTERM) and waits until it is gone. */
export async function stopPid(pid: number): Promise<void> {
  process.kill(pid, 'SIGTERM');
  await waitFor(() => gone(pid), 15_000);
}

/**
 * GETs `url`/healthz every `intervalMs` (50: the interval the issue names, not a wait for a
 * condition; 0: back to back, so a kept-alive connection is almost never idle) from `loops`
 * loops at once, until stopped; counts the requests that were refused or failed.
 */
export function pollHealth(url: string, o: { intervalMs?: number; loops?: number } = {}): { stop: () => Promise<{ polls: number; failed: string[] }> } {
  let running = true;
  let polls = 0;
  const failed: string[] = [];
  const loop = async () => {
    while (running) {
      polls++;
      try {
        const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(scaled(5000)) });
        if (res.status !== 200) failed.push(`status ${res.status}`);
        await res.arrayBuffer();
      } catch (err) {
        failed.push(String((err as Error).cause ?? err));
      }
      await sleep(o.intervalMs ?? 50);
    }
  };
  const loops = Promise.all(Array.from({ length: o.loops ?? 1 }, loop));
  return {
    stop: async () => {
      running = false;
      await loops;
      return { polls, failed };
    },
  };
}

/**
 * A new process's link to an old one (Successor.attach) over an in-memory channel the test
 * speaks for the old process: `fromOld` gives it a message, `gone` closes the channel, `sent`
 * is what it told the old one. `disconnect` is what its own disconnect does (nothing, or the
 * channel closing: `() => link.gone()`).
 */
export function linkedSuccessor(disconnect: (link: { gone: () => void }) => void = () => {}) {
  const port = new EventEmitter();
  const sent: ToOld[] = [];
  const gone = () => void port.emit('disconnect');
  const successor = Successor.attach({
    send: (m) => void sent.push(m),
    onMessage: (l) => void port.on('message', l),
    onDisconnect: (l) => void port.once('disconnect', l),
    disconnect: () => disconnect({ gone }),
  });
  return { successor, sent, fromOld: (m: unknown) => void port.emit('message', m), gone };
}

/**
 * A stand-in for the new build: records what it is told, never says ready, and ends when the
 * old process closes the channel (a SIGTERM, as the daemon's stop, takes a while). Its pid is
 * written last: a test that has read it may signal it, and a SIGTERM before its handler was
 * in place killed it (on a CPU-starved machine, between two lines) before it read the abort.
 */
export const NEVER_READY = `
const fs = require('node:fs');
process.on('message', (m) => fs.appendFileSync(process.env.CHANNELD_TEST_CHILD_PID + '.got', JSON.stringify(m) + '\\n'));
const keep = setInterval(() => {}, 60000);
const end = () => { clearInterval(keep); process.exit(0); };
process.on('SIGTERM', () => {});
process.on('disconnect', end);
fs.writeFileSync(process.env.CHANNELD_TEST_CHILD_PID, String(process.pid));
`;

/** One that says ready at once. */
export const READY = `${NEVER_READY}
process.send({ t: 'ready' });
`;

/**
 * A stand-in for the new build, for a real Predecessor over a real IPC channel: `scripts` are
 * written to a temp dir (run one with `upgrade({ exec: script(name) })`), the child writes its
 * pid to `pidFile` (CHANNELD_TEST_CHILD_PID) and what it is told beside it (`.got`), and any
 * open descriptor stands in for the listening socket (`fd`). `cleanup` kills a child left
 * running, puts the variable back and removes the dir.
 */
export function standInChild(prefix: string, scripts: Record<string, string>) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  for (const [name, text] of Object.entries(scripts)) writeFileSync(join(dir, name), text);
  const pidFile = join(dir, 'child.pid');
  const before = process.env.CHANNELD_TEST_CHILD_PID;
  process.env.CHANNELD_TEST_CHILD_PID = pidFile;
  const fd = openSync(join(dir, 'socket'), 'w');
  const childPid = () => {
    try {
      return Number(readFileSync(pidFile, 'utf8'));
    } catch {
      return 0;
    }
  };
  const cleanup = () => {
    const pid = childPid();
    if (pid && !gone(pid)) process.kill(pid, 'SIGKILL');
    if (before === undefined) delete process.env.CHANNELD_TEST_CHILD_PID;
    else process.env.CHANNELD_TEST_CHILD_PID = before;
    closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  };
  return { script: (name: string) => join(dir, name), pidFile, fd, childPid, cleanup };
}
