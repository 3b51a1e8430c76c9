import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { MemoryTrimmer, type MemoryTrimOptions, type Trim } from '../../../src/observe/memory-trim.js';

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
  it('after work, once idle for a whole interval, trims when RSS grew past what it settled at', () => {
    const { state, trims, trimmer } = rig();
    state.events = 3; // turns ran
    state.rss = 140 * MB;
    expect(trimmer.check()).toBeUndefined(); // the interval saw work: not idle yet
    state.live = 110 * MB;
    const trim = trimmer.check(); // a whole interval with nothing queued, started or ended
    expect(trim).toMatchObject({ reason: 'idle', rssBeforeBytes: 140 * MB, rssAfterBytes: 110 * MB });
    expect(state.gcCalls).toEqual([{ type: 'major', execution: 'sync', flavor: 'last-resort' }]);
    expect(trims).toEqual([trim]);
  });

  it('does not trim at idle when RSS stayed within 5 % of the settled size', () => {
    const { state, trimmer } = rig();
    state.rss = 104 * MB;
    expect(trimmer.check()).toBeUndefined();
    state.rss = 106 * MB;
    expect(trimmer.check()?.reason).toBe('idle');
    // Settled again at what the trim left: the same size later is not a reason to trim again.
    expect(state.rss).toBe(100 * MB);
    state.rss = 104 * MB;
    expect(trimmer.check()).toBeUndefined();
  });

  it('a turn still running is not idle, even when no event moved', () => {
    const { state, trimmer } = rig();
    state.pending = 1;
    state.rss = 140 * MB;
    expect(trimmer.check()).toBeUndefined();
  });

  it('under load trims only past 1.5x the settled RSS, and at most once per 30 s', () => {
    const { state, trims, trimmer } = rig();
    state.pending = 5;
    state.live = 120 * MB;
    state.rss = 149 * MB;
    state.events++;
    expect(trimmer.check()).toBeUndefined();
    state.rss = 160 * MB;
    state.events++;
    expect(trimmer.check()?.reason).toBe('load');
    state.now += 29_000;
    state.rss = 170 * MB;
    state.events++;
    expect(trimmer.check()).toBeUndefined(); // too soon after the last one
    state.now += 1_000;
    state.events++;
    expect(trimmer.check()?.reason).toBe('load');
    // A load trim does not move the settled size: only an idle trim does.
    expect(trims.map((t) => t.rssAfterBytes)).toEqual([120 * MB, 120 * MB]);
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

  it("with node's --expose-gc the real collection gives a burst's memory back to the system", () => {
    const child = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', join(import.meta.dirname, '../../fixtures/memory-trim-child.ts')], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(child.stderr).toBe('');
    const { enabled, trim } = JSON.parse(child.stdout) as { enabled: boolean; trim: Trim };
    expect(enabled).toBe(true);
    expect(trim.reason).toBe('idle');
    // A regular full collection leaves RSS where it was (the pages stay mapped); this one
    // gives most of the burst back.
    expect(trim.rssAfterBytes).toBeLessThan(trim.rssBeforeBytes * 0.6);
  });
});
