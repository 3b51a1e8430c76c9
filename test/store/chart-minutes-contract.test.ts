import { describe, expect, it } from 'vitest';
import { PgMinuteStore } from '../../src/cluster/pg-minutes.js';
import { PgWriter } from '../../src/cluster/pg-writer.js';
import { chartReport } from '../../src/observe/chart-report.js';
import { emptyFigures, minuteOf } from '../../src/observe/minute-figures.js';
import { clusterSkipReason, quietLogger } from '../helpers/cluster.js';
import { migratedPools } from '../helpers/pg-schemas.js';

const skip = await clusterSkipReason();
const pools = migratedPools();

describe.skipIf(skip !== undefined)(`chart minutes in PostgreSQL${skip ? ` (skipped: ${skip})` : ''}`, () => {
  it("each instance writes its own rows; the charts add every instance's up, and a restarted instance continues its own", async () => {
    const pool = await pools(2);
    const { log } = quietLogger();
    const now = Date.now();
    const minute = minuteOf(now);
    const since = minute - 1439;
    const a = new PgMinuteStore(new PgWriter(pool, log), 'a');
    const b = new PgMinuteStore(new PgWriter(pool, log), 'b');
    await a.write([{ minute, figures: { ...emptyFigures(), messages: 2, cost: { x: 0.5 } } }], since);
    await b.write([{ minute, figures: { ...emptyFigures(), messages: 3, cost: { x: 0.25, y: 1 } } }], since);
    await b.write([{ minute: since - 1, figures: { ...emptyFigures(), messages: 100 } }], since - 1);
    // Replaced, not added: a row is the instance's whole minute.
    await a.write([{ minute, figures: { ...emptyFigures(), messages: 4, cost: { x: 0.5 } } }], since);
    const report = chartReport(await a.all(since), 1440, now);
    expect(report.messages.at(-1)).toBe(7);
    expect(report.cost).toEqual({ x: expect.any(Array), y: expect.any(Array) });
    expect(report.cost.x!.at(-1)).toBe(0.75);
    expect(report.messages.reduce((x, y) => x + y, 0)).toBe(7);
    const again = new PgMinuteStore(new PgWriter(pool, log), 'a');
    expect(await again.own(since)).toEqual([{ minute, figures: expect.objectContaining({ messages: 4 }) }]);
    // The older minute goes with the next write.
    await again.write([], since);
    expect((await again.all(since - 10)).map((r) => r.minute)).toEqual([minute, minute]);
  });
});
