import { type MinuteRow, type MinuteStore, parseFigures } from '../observe/minute-figures.js';
import type { PgWriter } from './pg-writer.js';

/**
 * The /admin charts' minutes in PostgreSQL: one row per instance and minute, so every
 * instance writes only its own rows and the page shows the cluster's sum (minutes add up
 * bucket by bucket). Instances that are gone keep counting in the minutes they ran. Each
 * instance writes at every minute's end, so another instance's current minute shows up to a
 * minute late on this one's page.
 */
export class PgMinuteStore implements MinuteStore {
  constructor(
    private readonly w: PgWriter,
    private readonly instance: string,
  ) {}

  async own(sinceMinute: number): Promise<MinuteRow[]> {
    return parse(
      await this.w.read<{ minute: string; figures: unknown }>('SELECT minute, figures FROM chart_minutes WHERE instance = $1 AND minute >= $2', [
        this.instance,
        sinceMinute,
      ]),
    );
  }

  async all(sinceMinute: number): Promise<MinuteRow[]> {
    await this.w.flush();
    return parse(await this.w.read<{ minute: string; figures: unknown }>('SELECT minute, figures FROM chart_minutes WHERE minute >= $1', [sinceMinute]));
  }

  async write(rows: readonly MinuteRow[], sinceMinute: number): Promise<void> {
    for (const r of rows)
      this.w.add(
        'INSERT INTO chart_minutes (instance, minute, figures) VALUES ($1, $2, $3) ON CONFLICT (instance, minute) DO UPDATE SET figures = excluded.figures',
        [this.instance, r.minute, JSON.stringify(r.figures)],
      );
    this.w.add('DELETE FROM chart_minutes WHERE minute < $1', [sinceMinute]);
    await this.w.flush();
  }
}

function parse(rows: Array<{ minute: string; figures: unknown }>): MinuteRow[] {
  const out: MinuteRow[] = [];
  for (const r of rows) {
    const figures = parseFigures(r.figures);
    if (figures) out.push({ minute: Number(r.minute), figures });
  }
  return out;
}
