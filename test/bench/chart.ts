import type { Row } from './report.js';

/** The load scenario's rows as (level, p50, p99) points, in level order. */
export function loadCurve(rows: readonly Row[]): Array<{ level: number; p50: number; p99: number }> {
  const points = new Map<number, { level: number; p50: number; p99: number }>();
  for (const r of rows) {
    const m = /^(\d+) concurrent conversations, message → final, (p50|p99)$/.exec(r.metric);
    if (r.scenario !== 'load' || !m) continue;
    const level = Number(m[1]);
    const p = points.get(level) ?? { level, p50: NaN, p99: NaN };
    p[m[2] as 'p50' | 'p99'] = r.value;
    points.set(level, p);
  }
  return [...points.values()].sort((a, b) => a.level - b.level);
}

/**
 * A small SVG line chart of the load curve: concurrent conversations on a log axis, latency
 * in seconds; p50 and p99. Plain SVG text so it renders on GitHub and in any browser.
 */
export function loadChartSvg(points: ReturnType<typeof loadCurve>, title: string): string {
  const w = 560;
  const h = 300;
  const pad = { l: 56, r: 28, t: 34, b: 44 };
  const maxLevel = Math.max(...points.map((p) => p.level), 10);
  const maxMs = Math.max(...points.map((p) => p.p99), 1) * 1.1;
  const x = (level: number) => pad.l + (Math.log10(level) / Math.log10(maxLevel)) * (w - pad.l - pad.r);
  const y = (ms: number) => h - pad.b - (ms / maxMs) * (h - pad.t - pad.b);
  const line = (k: 'p50' | 'p99') => points.map((p) => `${x(p.level).toFixed(1)},${y(p[k]).toFixed(1)}`).join(' ');
  const yTicks = Array.from({ length: 5 }, (_, i) => (maxMs / 4) * i);
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" font-family="sans-serif" font-size="12">`,
    `<rect width="${w}" height="${h}" fill="#fff"/>`,
    `<text x="${w / 2}" y="20" text-anchor="middle" font-size="14">${title}</text>`,
    `<line x1="${pad.l}" y1="${h - pad.b}" x2="${w - pad.r}" y2="${h - pad.b}" stroke="#333"/>`,
    `<line x1="${pad.l}" y1="${pad.t}" x2="${pad.l}" y2="${h - pad.b}" stroke="#333"/>`,
    ...points.map((p) => `<text x="${x(p.level).toFixed(1)}" y="${h - pad.b + 16}" text-anchor="middle">${p.level}</text>`),
    `<text x="${(pad.l + w - pad.r) / 2}" y="${h - 8}" text-anchor="middle">concurrent conversations (log scale)</text>`,
    ...yTicks.map((ms) => `<text x="${pad.l - 6}" y="${(y(ms) + 4).toFixed(1)}" text-anchor="end">${(ms / 1000).toFixed(1)} s</text>`),
    `<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="${line('p50')}"/>`,
    `<polyline fill="none" stroke="#d62728" stroke-width="2" points="${line('p99')}"/>`,
    `<text x="${w - pad.r - 90}" y="${pad.t + 10}" fill="#1f77b4">― p50</text>`,
    `<text x="${w - pad.r - 90}" y="${pad.t + 26}" fill="#d62728">― p99</text>`,
    '</svg>',
  ];
  return `${parts.join('\n')}\n`;
}
