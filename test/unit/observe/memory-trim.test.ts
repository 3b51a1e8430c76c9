import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { CHECK_INTERVAL_MS, IDLE_QUIET_MS, MemoryTrimmer, type MemoryTrimOptions, type Trim } from '../../../src/observe/memory-trim.js';

const MB = 2 ** 20;

/** A trimmer on a fake process: `rss` and the clock are set by the test; gc "frees" down to `live`. */
function rig(o: Partial<MemoryTrimOptions> = {}) {
  const state = { rss: 100 * MB, live: 100 * MB, now: 0, pending: 0, events: 0, gcCalls: [] as object[] };
  const trims: Trim[] = [];
  const trimmer = new MemoryTrimmer({
    activity: { pending: () => state.pending, events: () => state.events },
    gc: (options) => {
      state.gcCalls.push(options);
      state.rss = state.live;
    },
    rssBytes: () => state.rss,
    now: () => state.now,
    onTrim: (t) => trims.push(t),
    ...o,
  });
  return { state, trims, trimmer };
}

describe('memory trim', () => {
  it('once idle after start-up it trims, and what is left is the settled size', () => {
    const { state, trimmer } = rig();
    state.rss = 130 * MB; // the SDKs loaded after the trimmer was made
    state.live = 110 * MB;
    expect(trimmer.check()).toMatchObject({ reason: 'idle', rssBeforeBytes: 130 * MB, rssAfterBytes: 110 * MB });
    // Idle and nothing moved since: no second trim, even as RSS creeps up (memory that grows
    // without turns, as on a cluster instance that only forwards, is not trimmed at idle).
    state.rss = 140 * MB;
    expect(trimmer.check()).toBeUndefined();
    expect(state.gcCalls).toEqual([{ type: 'major', execution: 'sync', flavor: 'last-resort' }]);
  });

  it('after work, once 30 s had none, trims when RSS grew past 2 % of the settled size', () => {
    const { state, trims, trimmer } = rig();
    trimmer.check(); // the start-up trim: settled at 100 MB
    state.events = 3; // turns ran
    state.rss = 140 * MB;
    expect(trimmer.check()).toBeUndefined(); // the interval saw work: not idle yet
    state.live = 110 * MB;
    state.now += IDLE_QUIET_MS;
    const trim = trimmer.check();
    expect(trim).toMatchObject({ reason: 'idle', rssBeforeBytes: 140 * MB, rssAfterBytes: 110 * MB });
    expect(trims.at(-1)).toEqual(trim);
    // Work that left RSS within 2 % of the new settled size (110 MB) is no reason to pause.
    state.events++;
    expect(trimmer.check()).toBeUndefined();
    state.rss = 112 * MB;
    state.now += IDLE_QUIET_MS;
    expect(trimmer.check()).toBeUndefined();
    expect(trims).toHaveLength(2);
  });

  it('a lull shorter than 30 s after turns is no reason to trim: the next burst would take the memory back', () => {
    const { state, trims, trimmer } = rig();
    trimmer.check(); // the start-up trim needs no wait
    expect(trims).toHaveLength(1);
    state.events++; // a burst of turns (below the load trim's 1.5x of the settled 100 MB)
    state.rss = 140 * MB;
    expect(trimmer.check()).toBeUndefined();
    // Quiet for the next five checks, five seconds apart: the memory stays for the next burst.
    for (let i = 0; i < 5; i++) {
      state.now += CHECK_INTERVAL_MS;
      expect(trimmer.check()).toBeUndefined();
    }
    // Another burst in the lull starts the wait again, and a turn still running holds it off.
    state.events++;
    state.now += CHECK_INTERVAL_MS;
    expect(trimmer.check()).toBeUndefined();
    state.pending = 1;
    state.now += IDLE_QUIET_MS;
    expect(trimmer.check()).toBeUndefined();
    state.pending = 0;
    state.now += IDLE_QUIET_MS - 1;
    expect(trimmer.check()).toBeUndefined();
    state.now += 1;
    expect(trimmer.check()).toMatchObject({ reason: 'idle', rssBeforeBytes: 140 * MB });
    expect(trims).toHaveLength(2);
  });

  it('a turn still running is not idle, even when no event moved', () => {
    const { state, trimmer } = rig();
    trimmer.check();
    state.events++;
    state.pending = 1;
    state.rss = 140 * MB;
    expect(trimmer.check()).toBeUndefined();
    expect(trimmer.check()).toBeUndefined();
  });

  it('under load trims only past 1.5x the settled RSS, at most once per 30 s, and not again for what stayed live', () => {
    const { state, trims, trimmer } = rig();
    state.pending = 5; // busy from the start: the first look is the reference (100 MB)
    state.events++;
    expect(trimmer.check()).toBeUndefined();
    state.rss = 149 * MB;
    state.events++;
    expect(trimmer.check()).toBeUndefined();
    state.rss = 160 * MB;
    state.live = 120 * MB;
    state.events++;
    expect(trimmer.check()?.reason).toBe('load');
    // The trim left 120 MB, more than the reference: that is the settled size now (1.5x: 180 MB).
    state.now += 29_000;
    state.rss = 185 * MB;
    state.events++;
    expect(trimmer.check()).toBeUndefined(); // too soon after the last one
    state.now += 1_000;
    state.events++;
    expect(trimmer.check()?.reason).toBe('load');
    // The live data grew: a trim leaves 145 MB. The settled size follows it, so 160 MB a
    // minute later (under 1.5x 145) is no reason for another pause that would free nothing.
    state.live = 145 * MB;
    state.rss = 200 * MB;
    state.now += 30_000;
    state.events++;
    expect(trimmer.check()?.rssAfterBytes).toBe(145 * MB);
    state.rss = 160 * MB;
    state.now += 60_000;
    state.events++;
    expect(trimmer.check()).toBeUndefined();
    expect(trims.map((t) => t.reason)).toEqual(['load', 'load', 'load']);
  });

  it('without --expose-gc it is off and never looks', () => {
    vi.useFakeTimers();
    try {
      const { state, trims, trimmer } = rig({ gc: undefined });
      expect(trimmer.enabled).toBe(false);
      trimmer.start();
      state.rss = 500 * MB;
      vi.advanceTimersByTime(60_000);
      expect(trims).toEqual([]);
      trimmer.stop();
    } finally {
      vi.useRealTimers();
    }
  });

  it('with --expose-gc it looks every interval until stopped', () => {
    vi.useFakeTimers();
    try {
      const { state, trims, trimmer } = rig();
      trimmer.start();
      state.rss = 500 * MB;
      vi.advanceTimersByTime(5_000);
      expect(trims.map((t) => t.reason)).toEqual(['idle']);
      trimmer.stop();
      state.rss = 500 * MB;
      vi.advanceTimersByTime(60_000);
      expect(trims).toHaveLength(1);
    } finally {
      vi.useRealTimers();
    }
  });

  it.each([
    ["node's --expose-gc", ['--expose-gc'], {}],
    ['CHANNELD_V8_FLAGS=--expose-gc (node without the flag)', [], { CHANNELD_V8_FLAGS: '--expose-gc' }],
  ])("with %s the real collection gives a burst's memory back to the system", (_how, nodeArgs, env) => {
    const child = spawnSync(process.execPath, [...nodeArgs, '--import', 'tsx', join(import.meta.dirname, '../../fixtures/memory-trim-child.ts')], {
      encoding: 'utf8',
      timeout: 60_000,
      env: { ...process.env, CHANNELD_V8_FLAGS: '', ...env },
    });
    expect(child.status, child.stderr).toBe(0);
    const { enabled, trim } = JSON.parse(child.stdout) as { enabled: boolean; trim: Trim };
    expect(enabled).toBe(true);
    expect(trim.reason).toBe('idle');
    // A regular full collection leaves RSS where it was (the pages stay mapped); this one
    // gives most of the burst back.
    expect(trim.rssAfterBytes).toBeLessThan(trim.rssBeforeBytes * 0.6);
  });
});
