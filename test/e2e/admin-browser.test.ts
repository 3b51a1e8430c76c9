import { readFileSync, writeFileSync } from 'node:fs';
import type { Browser } from 'playwright-core';
import { hasChromium, launchChromium } from '../helpers/browser.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeLlm } from '../fakes/llm/server.js';
import { FakeTelegram } from '../fakes/telegram/server.js';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { ChatClient } from '../helpers/webchat-client.js';

describe.runIf(hasChromium)('operator page /admin in headless Chromium (skipped where /usr/bin/chromium is missing)', () => {
  let d: TestDaemon;
  let tg: FakeTelegram;
  let llm: FakeLlm;
  let browser: Browser;
  beforeAll(async () => {
    tg = new FakeTelegram();
    await tg.start();
    llm = new FakeLlm();
    await llm.start();
    d = await startDaemon(
      `[agent]\nprovider = "openai-compatible"\nbase_url = "${llm.url}"\nmodel = "m"\n\n[[channels]]\nid = "web"\ntype = "webchat"\n\n[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG"\napi_root = "${tg.url}"\nallow_from = ["*"]\n[channels.backoff]\ninitial_ms = 6000\n`,
      { TG: tg.token },
    );
    await d.daemon.supervisor.firstAttempts();
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await d?.stop();
    await tg?.close();
    await llm?.close();
  });

  it('shows a channel going to backoff when its platform drops, live', async () => {
    const page = await browser.newPage();
    await page.goto(`${d.url}/admin`);
    await page.waitForSelector('tr[data-channel="tg"] .state.connected');
    // Telegram starts failing: the listener ends and the supervisor backs off.
    tg.fail('getUpdates', { status: 502 }, 50);
    tg.dropConnections();
    await page.waitForSelector('tr[data-channel="tg"] .state.backoff');
    expect(await page.textContent('tr[data-channel="tg"]')).toMatch(/CHANNEL_(NETWORK|UNAVAILABLE)/);
    expect(await page.textContent('tr[data-channel="web"] .state')).toBe('connected');
    await page.close();
  });

  it('stops a running turn with its button', async () => {
    const page = await browser.newPage();
    await page.goto(`${d.url}/admin`);
    await page.waitForSelector('#turns');
    const c = new ChatClient(d.url, 'tab-admin');
    await c.opened;
    // The model writes one word and then waits until the turn is stopped: the turn runs for
    // as long as the page takes to show the button and the click takes to land.
    llm.script({ kind: 'stream', chunks: [{ content: 'one ' }, { content: 'two', after: new Promise(() => {}) }] });
    c.send('one two');
    // A locator, not an element handle: the live table may re-render between finding and clicking.
    await page.locator('button[data-stop]').first().click({ timeout: 10_000 });
    const [final] = await c.finals();
    expect(final!.text).toMatch(/⏹ Stopped\.$/);
    expect(final!.text).not.toContain('two');
    await page.waitForSelector('#notice:text("cancelled")');
    await waitFor(async () => (await page.textContent('#turns'))?.includes('no turns'));
    await page.screenshot({ path: `${d.dir}/admin.png` });
    c.close();
    await page.close();
  });

  it('a reload refused through SIGHUP or the CLI shows at once, styled as an error', async () => {
    const page = await browser.newPage();
    await page.goto(`${d.url}/admin`);
    await page.waitForSelector('tr[data-channel="web"]');
    const good = readFileSync(d.configFile, 'utf8');
    writeFileSync(d.configFile, `${good}\n[limits]\nmax_in_flight = 0\n`);
    try {
      await d.daemon.reload(); // what SIGHUP and `channeld reload` call
      const el = await page.waitForSelector('#last-reload.refused', { timeout: 10_000 });
      expect(await el.textContent()).toContain('limits.max_in_flight');
      expect(await page.evaluate(`getComputedStyle(document.getElementById('last-reload')).color`)).toBe('rgb(185, 28, 28)');
    } finally {
      writeFileSync(d.configFile, good);
    }
    await page.close();
  });

  it('fits a 390 px phone without sideways scrolling', async () => {
    const page = await browser.newPage({ viewport: { width: 390, height: 800 }, isMobile: true });
    await page.goto(`${d.url}/admin`);
    await page.waitForSelector('tr[data-channel="tg"]');
    const overflow = (await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth')) as number;
    expect(overflow).toBeLessThanOrEqual(0);
    const sections = (await page.evaluate(`[...document.querySelectorAll('section')].map((e) => e.scrollWidth - e.clientWidth)`)) as number[];
    expect(Math.max(...sections)).toBeLessThanOrEqual(0);
    await page.close();
  });
});

describe.runIf(hasChromium)('operator page with an admin token (skipped where /usr/bin/chromium is missing)', () => {
  let d: TestDaemon;
  let browser: Browser;
  beforeAll(async () => {
    d = await startDaemon(`[[channels]]\nid = "web"\ntype = "webchat"\n`, { ADMIN: 'admin-token-once' }, '', 'admin_token_env = "ADMIN"\n');
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await d?.stop();
  });

  it('asks for the token in a password form: a wrong one says so and asks again, the right one shows the channels; a favicon', async () => {
    const page = await browser.newPage();
    const dialogs: string[] = [];
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    await page.goto(`${d.url}/admin`);
    await page.waitForSelector('#login:not([hidden]) input[type="password"]');
    await page.fill('#login-token', 'not-the-token');
    await page.click('#login button[type="submit"]');
    await page.waitForSelector('#login-error:text("refused")');
    expect(await page.isVisible('#login')).toBe(true);
    await page.fill('#login-token', 'admin-token-once');
    await page.click('#login button[type="submit"]');
    await page.waitForSelector('tr[data-channel="web"] .state.connected');
    expect(await page.isVisible('#login')).toBe(false);
    expect(dialogs).toEqual([]);
    const icon = await page.evaluate(`fetch(document.querySelector('link[rel="icon"]').href).then((r) => r.status + ' ' + r.headers.get('content-type'))`);
    expect(icon).toBe('200 image/svg+xml');
    await page.close();
  });

  it('a reload refused from the page is shown once, in the last-reload line', async () => {
    const page = await browser.newPage();
    await page.goto(`${d.url}/admin`);
    await page.fill('#login-token', 'admin-token-once');
    await page.click('#login button[type="submit"]');
    await page.waitForSelector('tr[data-channel="web"]');
    const good = readFileSync(d.configFile, 'utf8');
    writeFileSync(d.configFile, `${good}\n[limits]\nmax_in_flight = 0\n`);
    try {
      await page.click('#reload');
      await page.waitForSelector('#last-reload.refused');
      const text = (await page.textContent('header')) ?? '';
      expect(text.split('limits.max_in_flight')).toHaveLength(2);
    } finally {
      writeFileSync(d.configFile, good);
    }
    await page.close();
  });
});
