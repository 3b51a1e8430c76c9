// The /admin charts: the last 24 h from GET /actions/charts, drawn with uPlot (served by the
// daemon at /admin/uplot.js). A file of its own next to admin-page.js, which it uses only
// through window.channeldAdmin.call (the same sign-in) and the "channeld:loaded" event.
(() => {
  const grid = document.getElementById('charts-grid');
  const PALETTE = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#65a30d'];
  /** At most one request at a time and one every REFRESH_MS, whatever triggers it. */
  const REFRESH_MS = 15_000;
  const HEIGHT = 170;
  const plots = new Map();
  let last = 0;
  let running = false;

  const sum = (a) => a.reduce((x, y) => x + (y || 0), 0);
  const ms = (v) => (v == null ? '—' : v >= 1000 ? `${(v / 1000).toFixed(1)} s` : `${Math.round(v)} ms`);

  const cost = (v) => (v == null ? '—' : v === 0 ? '0' : v >= 1 ? v.toFixed(2) : v.toPrecision(2));
  const worst = (a) => Math.max(0, ...a.filter((v) => v != null));
  const totals = (series, fmt = String) => series.map((s) => `${s.label} ${fmt(Math.round(sum(s.values) * 1e6) / 1e6)}`).join(' · ');

  /** The charts: a title, the series (label → values), how values read, and a one-line summary. */
  function specs(d) {
    const named = (m) => Object.entries(m).map(([k, v]) => ({ label: k, values: v }));
    const traffic = [
      { label: 'messages', values: d.messages },
      { label: 'turns', values: d.turns },
    ];
    const latency = [
      { label: 'p50', values: d.turn_p50_ms },
      { label: 'p99', values: d.turn_p99_ms },
    ];
    const visible = [
      { label: 'p50', values: d.first_visible_p50_ms },
      { label: 'p99', values: d.first_visible_p99_ms },
    ];
    // Latencies exist only in minutes with turns: drawn as points, so a lone minute shows.
    return [
      { id: 'traffic', title: 'Messages and turns per minute', series: traffic, summary: totals(traffic) },
      { id: 'latency', title: 'Turn latency (p50, p99)', fmt: ms, points: true, series: latency, summary: `worst p99 ${ms(worst(d.turn_p99_ms))}` },
      {
        id: 'visible',
        title: 'First visible update (p50, p99)',
        fmt: ms,
        points: true,
        series: visible,
        summary: `worst p99 ${ms(worst(d.first_visible_p99_ms))}`,
      },
      { id: 'tokens', title: 'Tokens per agent', series: named(d.tokens), summary: totals(named(d.tokens)) },
      { id: 'cost', title: 'Cost per agent', fmt: cost, series: named(d.cost), summary: totals(named(d.cost), cost) },
      { id: 'refusals', title: 'Refusals by reason', series: named(d.refusals), summary: totals(named(d.refusals)) },
    ];
  }

  /** The y axis as wide as its longest label (11 px digits), so none is clipped on the left. */
  const labelWidth = (_u, values) => (values?.length ? Math.ceil(Math.max(...values.map((v) => String(v).length)) * 6.6) + 18 : 40);

  function box(spec) {
    let el = grid.querySelector(`[data-chart="${spec.id}"]`);
    if (!el) {
      el = document.createElement('div');
      el.className = 'chart';
      el.dataset.chart = spec.id;
      const h = document.createElement('h3');
      h.textContent = spec.title;
      const summary = document.createElement('div');
      summary.className = 'chart-sum';
      const body = document.createElement('div');
      body.className = 'chart-body';
      el.append(h, summary, body);
      grid.append(el);
      // uPlot draws at a fixed width: it follows its box as the grid or the window changes.
      new ResizeObserver(() => {
        const p = plots.get(spec.id);
        if (p && body.clientWidth && body.clientWidth !== p.plot.width) p.plot.setSize({ width: body.clientWidth, height: HEIGHT });
      }).observe(body);
    }
    return el;
  }

  function draw(d) {
    const muted = getComputedStyle(document.body).getPropertyValue('--muted').trim() || '#6b7280';
    const border = getComputedStyle(document.body).getPropertyValue('--border').trim() || '#d9dce1';
    const all = specs(d);
    // Every box first: the grid's columns are settled before any chart takes its width.
    for (const spec of all) box(spec);
    for (const spec of all) {
      const el = box(spec);
      el.querySelector('.chart-sum').textContent = spec.series.length ? spec.summary : '';
      const body = el.querySelector('.chart-body');
      const total = sum(spec.series.map((s) => sum(s.values)));
      el.dataset.points = String(total);
      const key = spec.series.map((s) => s.label).join('\n');
      const old = plots.get(spec.id);
      if (!spec.series.length) {
        old?.plot.destroy();
        plots.delete(spec.id);
        body.textContent = 'none in the last 24 h';
        body.className = 'chart-body empty';
        continue;
      }
      const data = [d.t, ...spec.series.map((s) => s.values)];
      const width = Math.max(200, body.clientWidth);
      if (old && old.key === key) {
        old.plot.setData(data);
        continue;
      }
      old?.plot.destroy();
      body.replaceChildren();
      body.className = 'chart-body';
      const axis = { stroke: muted, grid: { stroke: border, width: 1 }, ticks: { stroke: border }, size: 40, font: '11px system-ui, sans-serif' };
      const plot = new uPlot(
        {
          width,
          height: HEIGHT,
          legend: { live: false },
          cursor: { drag: { x: false, y: false } },
          scales: { x: { time: true } },
          axes: [axis, { ...axis, size: labelWidth, values: spec.fmt ? (_u, vals) => vals.map((v) => spec.fmt(v)) : undefined }],
          series: [
            {},
            ...spec.series.map((s, i) => ({
              label: s.label,
              stroke: PALETTE[i % PALETTE.length],
              width: 1.5,
              spanGaps: false,
              points: spec.points ? { show: true, size: 5, fill: PALETTE[i % PALETTE.length] } : { show: false },
              value: spec.fmt ? (_u, v) => spec.fmt(v) : undefined,
            })),
          ],
        },
        data,
        body,
      );
      plots.set(spec.id, { plot, key });
    }
  }

  async function refresh(force) {
    if (running || !window.channeldAdmin || typeof uPlot === 'undefined') return;
    if (!force && Date.now() - last < REFRESH_MS) return;
    running = true;
    last = Date.now();
    try {
      draw(await window.channeldAdmin.call('/actions/charts'));
      grid.dataset.state = 'drawn';
    } catch (e) {
      grid.dataset.state = 'failed';
      grid.textContent = `charts unavailable: ${e.message}`;
      plots.clear();
    } finally {
      running = false;
    }
  }

  // The main page loads first (and asks for the token if needed); every load may refresh.
  document.addEventListener('channeld:loaded', () => refresh(false));
  setInterval(() => refresh(true), 60_000);
})();
