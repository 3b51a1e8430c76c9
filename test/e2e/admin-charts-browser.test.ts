import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeLlm } from '../fakes/llm/server.js';
import { hasChromium, launchChromium } from '../helpers/browser.js';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { ChatClient } from '../helpers/webchat-client.js';
import { midHourMs, shiftClockTo } from '../fixtures/clock-mid-hour.mjs';

interface Charts {
  t: number[];
  messages: number[];
  turns: number[];
  turn_p50_ms: Array<number | null>;
  first_visible_p50_ms: Array<number | null>;
  tokens: Record<string, number[]>;
  cost: Record<string, number[]>;
  refusals: Record<string, number[]>;
}
const sum = (a: Array<number | null>) => a.reduce<number>((x, y) => x + (y ?? 0), 0);

describe.runIf(hasChromium)('/admin charts in headless Chromium (skipped where /usr/bin/chromium is missing)', () => {
  let d: TestDaemon;
  let llm: FakeLlm;
  let browser: Browser;
  // Half past the hour in this process (the daemon runs in it): the hourly window cannot roll over mid-test.
  let restoreClock: () => void = () => {};
  beforeAll(() => {
    restoreClock = shiftClockTo(midHourMs());
  });
  afterAll(() => restoreClock());

  beforeAll(async () => {
    llm = new FakeLlm();
    await llm.start();
    d = await startDaemon(
      `[limits]\nuser_turns_per_hour = 2\n\n[agent]\nprovider = "openai-compatible"\nbase_url = "${llm.url}"\nmodel = "m"\n\n[models.m]\nprice_in_per_mtok = 3\nprice_out_per_mtok = 15\n\n[[channels]]\nid = "web"\ntype = "webchat"\n`,
    );
    // Traffic: two senders answered twice each, and one refused by user_turns_per_hour.
    for (const tab of ['tab-a', 'tab-b']) {
      const c = new ChatClient(d.url, tab);
      await c.opened;
      for (let i = 1; i <= (tab === 'tab-a' ? 3 : 2); i++) {
        c.send(`hello ${i}`);
        await c.finals(i);
      }
      c.close();
    }
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await d?.stop();
    await llm?.close();
  });

  it('GET /actions/charts has 1,440 minutes with the traffic in the current one', async () => {
    const r = (await (await fetch(`${d.url}/actions/charts`)).json()) as Charts;
    expect(r.t).toHaveLength(1440);
    expect(sum(r.messages)).toBe(5);
    expect(sum(r.turns)).toBe(5);
    expect(sum(r.turn_p50_ms)).toBeGreaterThan(0);
    expect(sum(r.first_visible_p50_ms)).toBeGreaterThan(0);
    expect(sum(r.tokens.default ?? [])).toBeGreaterThan(0);
    expect(sum(r.cost.default ?? [])).toBeGreaterThan(0);
    expect(sum(r.refusals.user_turns_per_hour ?? [])).toBe(1);
    const text = await (await fetch(`${d.url}/actions/charts?minutes=60`, { headers: { accept: 'text/plain' } })).text();
    expect(text).toContain('last 60 min: 5 messages, 5 turns');
    expect((await fetch(`${d.url}/actions/charts?minutes=2000`)).status).toBe(400);
  });

  async function drawn(page: Page): Promise<Record<string, number>> {
    await page.goto(`${d.url}/admin`);
    await page.waitForSelector('#charts-grid[data-state="drawn"]');
    return (await page.evaluate(
      `Object.fromEntries([...document.querySelectorAll('.chart')].map((c) => [c.dataset.chart, c.querySelector('canvas') ? Number(c.dataset.points) : -1]))`,
    )) as Record<string, number>;
  }

  it('draws every chart with data at desktop width', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 1400 } });
    const charts = await drawn(page);
    expect(Object.keys(charts).sort()).toEqual(['cost', 'latency', 'refusals', 'tokens', 'traffic', 'visible']);
    for (const [id, points] of Object.entries(charts)) expect(points, id).toBeGreaterThan(0);
    await page.locator('#charts').screenshot({ path: '/tmp/channeld-admin-charts-desktop.png' });
    await page.close();
  });

  it('fits a 390 px phone: every chart drawn, nothing wider than the screen', async () => {
    const page = await browser.newPage({ viewport: { width: 390, height: 800 }, isMobile: true });
    const charts = await drawn(page);
    for (const [id, points] of Object.entries(charts)) expect(points, id).toBeGreaterThan(0);
    const overflow = (await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth')) as number;
    expect(overflow).toBeLessThanOrEqual(0);
    const widest = (await page.evaluate(
      `Math.max(...[...document.querySelectorAll('#charts canvas, #charts .u-legend')].map((e) => e.getBoundingClientRect().right))`,
    )) as number;
    expect(widest).toBeLessThanOrEqual(390);
    await page.locator('#charts').screenshot({ path: '/tmp/channeld-admin-charts-390.png' });
    await page.close();
  });

  it('serves uPlot itself, under its Content-Security-Policy (no CDN)', async () => {
    const page = await browser.newPage();
    const external: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith(d.url)) external.push(r.url());
    });
    const errors: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    await drawn(page);
    expect(external).toEqual([]);
    expect(errors).toEqual([]);
    const js = await fetch(`${d.url}/admin/uplot.js`);
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(await js.text()).toContain('uPlot');
    await waitFor(() => true);
    await page.close();
  });
});
