import type { Browser } from 'playwright-core';
import { hasChromium, launchChromium } from '../helpers/browser.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeTelegram } from '../fakes/telegram/server.js';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { ChatClient } from '../helpers/webchat-client.js';


describe.runIf(hasChromium)('operator page /admin in headless Chromium (skipped where /usr/bin/chromium is missing)', () => {
  let d: TestDaemon;
  let tg: FakeTelegram;
  let browser: Browser;
  beforeAll(async () => {
    tg = new FakeTelegram();
    await tg.start();
    d = await startDaemon(
      `[agent]\nprovider = "echo"\necho_delay_ms = 200\n\n[[channels]]\nid = "web"\ntype = "webchat"\n\n[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG"\napi_root = "${tg.url}"\nallow_from = ["*"]\n[channels.backoff]\ninitial_ms = 6000\n`,
      { TG: tg.token },
    );
    await d.daemon.supervisor.firstAttempts();
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await d?.stop();
    await tg?.close();
  });

  it('shows a channel going to backoff when its platform drops, live', async () => {
    const page = await browser.newPage();
    await page.goto(`${d.url}/admin`);
    await page.waitForSelector('tr[data-channel="tg"] .state.connected');
    // Telegram starts failing: the listener ends and the supervisor backs off.
    tg.fail('getUpdates', { status: 502 }, 50);
    tg.dropConnections();
    await page.waitForSelector('tr[data-channel="tg"] .state.backoff', { timeout: 10_000 });
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
    c.send('one two three four five six seven eight nine ten eleven twelve thirteen fourteen');
    // A locator, not an element handle: the live table may re-render between finding and clicking.
    await page.locator('button[data-stop]').first().click({ timeout: 10_000 });
    const [final] = await c.finals();
    expect(final!.text).toMatch(/⏹ Stopped\.$/);
    expect(final!.text).not.toContain('fourteen');
    await page.waitForSelector('#notice:text("cancelled")');
    await waitFor(async () => (await page.textContent('#turns'))?.includes('no turns'));
    await page.screenshot({ path: `${d.dir}/admin.png` });
    c.close();
    await page.close();
  });
});
