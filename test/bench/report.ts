/** One printed figure of a benchmark scenario. */
export interface Row {
  scenario: string;
  metric: string;
  value: number;
  unit: string;
  /** What we aim for, said in words ("< 0.5 ms"), and whether this run meets it. */
  target?: string;
  met?: boolean;
}

export interface ScenarioOptions {
  /** One tiny iteration, for the smoke test in `npm test`. */
  smoke: boolean;
}

export type Scenario = (o: ScenarioOptions) => Promise<Row[]>;

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export function formatTable(rows: Row[]): string {
  const lines = [['scenario', 'metric', 'value', 'unit', 'target', 'met']];
  for (const r of rows)
    lines.push([
      r.scenario,
      r.metric,
      Number.isInteger(r.value) ? String(r.value) : r.value.toFixed(3),
      r.unit,
      r.target ?? '',
      r.met === undefined ? '' : r.met ? 'yes' : 'NO',
    ]);
  const widths = lines[0]!.map((_, i) => Math.max(...lines.map((l) => l[i]!.length)));
  return lines
    .map((l) =>
      l
        .map((c, i) => c.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

export function median(values: number[]): number {
  return percentile(values, 50);
}

/**
 * Runs `a` and `b` alternately (A B A B …), `rounds` times each, so that a noisy machine
 * moves both figures alike; returns every sample of each, for medians and ratios.
 */
export async function interleaved<A, B>(rounds: number, a: () => Promise<A>, b: () => Promise<B>): Promise<{ a: A[]; b: B[] }> {
  const out = { a: [] as A[], b: [] as B[] };
  for (let i = 0; i < rounds; i++) {
    out.a.push(await a());
    out.b.push(await b());
  }
  return out;
}
