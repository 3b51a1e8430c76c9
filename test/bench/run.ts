import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadChartSvg, loadCurve } from './chart.js';
import { formatTable, type Row, type Scenario } from './report.js';
import { scenarios } from './scenarios/index.js';

/** `npm run bench`: every scenario, a table on stdout, and a JSON report in a temp file. */
async function main(): Promise<void> {
  const only = process.argv.slice(2).filter((a) => !a.startsWith('-'));
  const rows: Row[] = [];
  const started = Date.now();
  for (const [name, run] of Object.entries(scenarios) as [string, Scenario][]) {
    if (only.length && !only.includes(name)) continue;
    process.stderr.write(`bench: ${name}…\n`);
    const got = await run({ smoke: false });
    rows.push(...got);
    // Each scenario's figures as soon as it ends: a later scenario that fails loses none of them.
    process.stderr.write(`${formatTable(got)}\n`);
  }
  const file = join(tmpdir(), `channeld-bench-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify({ node: process.version, cpus: (await import('node:os')).cpus().length, at: new Date().toISOString(), rows }, null, 2));
  console.log(formatTable(rows));
  const curve = loadCurve(rows);
  if (curve.length) {
    // docs/PERFORMANCE.md shows this chart: the latest full run's load curve.
    const svg = join(import.meta.dirname, '../../docs/load-curve.svg');
    writeFileSync(svg, loadChartSvg(curve, `message → final text, 2 s model answer (Node ${process.version})`));
    console.log(`load curve chart: ${svg}`);
  }
  console.log(`\n${rows.length} figures in ${((Date.now() - started) / 1000).toFixed(1)} s; JSON report: ${file}`);
}

await main();
