import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { onTestFinished } from 'vitest';
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
