import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { chartReport } from '../../../src/observe/chart-report.js';
import { Metrics, TURN_DURATION_BUCKETS_S } from '../../../src/observe/metrics.js';
import { emptyFigures, MINUTE_MS, minuteOf, parseFigures, quantileMs } from '../../../src/observe/minute-figures.js';
import { MinuteRing } from '../../../src/observe/minute-ring.js';
import { openDb } from '../../../src/store/db.js';
import { GroupCommit } from '../../../src/store/group-commit.js';
import { SqliteMinuteStore } from '../../../src/store/minutes.js';

const T0 = Date.UTC(2026, 11, 1, 12, 0, 0);

describe('per-minute figures of the /admin charts', () => {
  it('p50 and p99 come from bucket counts, interpolated inside the bucket; none without samples', () => {
    const counts = new Array<number>(TURN_DURATION_BUCKETS_S.length + 1).fill(0);
    expect(quantileMs(counts, TURN_DURATION_BUCKETS_S, 0.5)).toBeNull();
    // 100 turns between 0.5 s and 1 s, one between 5 s and 10 s.
    counts[TURN_DURATION_BUCKETS_S.indexOf(1)] = 100;
    counts[TURN_DURATION_BUCKETS_S.indexOf(10)] = 1;
    expect(quantileMs(counts, TURN_DURATION_BUCKETS_S, 0.5)).toBe(Math.round((0.5 + (50.5 / 100) * 0.5) * 1000));
    expect(quantileMs(counts, TURN_DURATION_BUCKETS_S, 0.99)).toBeLessThanOrEqual(1000);
    expect(quantileMs(counts, TURN_DURATION_BUCKETS_S, 1)).toBe(10_000);
    // Past the last bound, the last bound is what is known.
    const over = new Array<number>(TURN_DURATION_BUCKETS_S.length + 1).fill(0);
    over[TURN_DURATION_BUCKETS_S.length] = 3;
    expect(quantileMs(over, TURN_DURATION_BUCKETS_S, 0.5)).toBe(120_000);
  });

  it('a sample adds what the metrics counted since the last one to its minute; what came before the ring is not counted', async () => {
    const m = new Metrics(false);
    m.received.inc({ channel: 'a' }, 7); // before the baseline
    const ring = new MinuteRing(m);
    await ring.sample(T0);
    m.received.inc({ channel: 'a' }, 2);
    m.received.inc({ channel: 'b' });
    m.turnDuration.observe({ channel: 'a', outcome: 'done' }, 0.7);
    m.turnDuration.observe({ channel: 'b', outcome: 'error' }, 7);
    m.firstVisible.observe({ channel: 'a' }, 0.2);
    m.tokens.inc({ agent: 'x', model: 'm', channel: 'a', type: 'input' }, 100);
    m.tokens.inc({ agent: 'x', model: 'm', channel: 'a', type: 'output' }, 20);
    m.cost.inc({ agent: 'x', model: 'm', channel: 'a' }, 0.25);
    m.refused.inc({ channel: 'a', reason: 'busy' });
    m.quotaRefusals.inc({ limit: 'user_turns_per_hour' }, 2);
    await ring.sample(T0 + 10_000);
    m.received.inc({ channel: 'a' });
    await ring.sample(T0 + MINUTE_MS + 5);
    const rows = ring.takeDirty();
    expect(rows.map((r) => r.minute)).toEqual([minuteOf(T0), minuteOf(T0) + 1]);
    expect(ring.takeDirty()).toEqual([]);
    const r = chartReport(rows, 3, T0 + MINUTE_MS + 5);
    expect(r.t).toEqual([(T0 - MINUTE_MS) / 1000, T0 / 1000, (T0 + MINUTE_MS) / 1000]);
    expect(r.messages).toEqual([0, 3, 1]);
    expect(r.turns).toEqual([0, 2, 0]);
    expect(r.turn_p50_ms[1]).toBeGreaterThan(500);
    expect(r.turn_p50_ms[1]).toBeLessThanOrEqual(1000);
    expect(r.turn_p99_ms[1]).toBeGreaterThan(5000);
    expect(r.turn_p50_ms[0]).toBeNull();
    expect(r.first_visible_p50_ms[1]).toBeGreaterThan(100);
    expect(r.tokens).toEqual({ x: [0, 120, 0] });
    expect(r.cost).toEqual({ x: [0, 0.25, 0] });
    expect(r.refusals).toEqual({ busy: [0, 1, 0], user_turns_per_hour: [0, 2, 0] });
  });

  it('keeps at most 1,440 minutes; rows of other instances add up minute by minute', async () => {
    const m = new Metrics(false);
    const ring = new MinuteRing(m);
    await ring.sample(T0);
    for (let i = 0; i < 1500; i++) {
      m.received.inc({ channel: 'a' });
      await ring.sample(T0 + i * MINUTE_MS);
    }
    expect(ring.size).toBe(1440);
    const a = { ...emptyFigures(), messages: 2 };
    const b = { ...emptyFigures(), messages: 3, tokens: { y: 5 } };
    const r = chartReport(
      [
        { minute: minuteOf(T0), figures: a },
        { minute: minuteOf(T0), figures: b },
      ],
      1440,
      T0,
    );
    expect(r.t).toHaveLength(1440);
    expect(r.messages.at(-1)).toBe(5);
    expect(r.tokens.y!.at(-1)).toBe(5);
  });

  it('a stored minute of another shape (other bucket bounds, damaged) is left out rather than failing', () => {
    expect(parseFigures(JSON.stringify(emptyFigures()))).toEqual(emptyFigures());
    expect(parseFigures('{nope')).toBeUndefined();
    expect(parseFigures({ ...emptyFigures(), turnLatency: [1, 2] })).toBeUndefined();
  });
});

describe('the chart minutes in SQLite', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it('survive a restart: a new ring over the reopened database continues the same minute', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'channeld-minutes-'));
    dirs.push(dir);
    const file = join(dir, 'channeld.db');
    const now = Date.now();
    const since = minuteOf(now) - 1439;
    {
      const db = openDb(file);
      const group = new GroupCommit(db);
      const store = new SqliteMinuteStore(db, group);
      const m = new Metrics(false);
      const ring = new MinuteRing(m);
      await ring.sample(now);
      m.received.inc({ channel: 'a' }, 4);
      await ring.sample(now);
      await store.write(ring.takeDirty(), since);
      // A minute older than the ring's 24 h goes when the store writes.
      await store.write([{ minute: since - 5, figures: { ...emptyFigures(), messages: 9 } }], since);
      group.close();
      db.close();
    }
    const db = openDb(file);
    const group = new GroupCommit(db);
    const store = new SqliteMinuteStore(db, group);
    const m = new Metrics(false);
    const ring = new MinuteRing(m);
    ring.load(await store.own(since), now);
    await ring.sample(now);
    m.received.inc({ channel: 'a' }, 1);
    await ring.sample(now);
    await store.write(ring.takeDirty(), since);
    const rows = await store.all(since - 10);
    expect(rows).toEqual([{ minute: minuteOf(now), figures: expect.objectContaining({ messages: 5 }) }]);
    group.close();
    db.close();
  });
});
