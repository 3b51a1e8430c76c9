import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasChromium, launchChromium } from '../helpers/browser.js';
import { startDaemon, type TestDaemon } from '../helpers/daemon.js';
import { ChatClient } from '../helpers/webchat-client.js';

describe.runIf(hasChromium)('/admin shows the next firings in headless Chromium (skipped where /usr/bin/chromium is missing)', () => {
  let d: TestDaemon;
  let browser: Browser;
  beforeAll(async () => {
    d = await startDaemon(
      `[agent]\nprovider = "echo"\necho_delay_ms = 5\n\n[[channels]]\nid = "web"\ntype = "webchat"\n\n` +
        `[[schedules]]\nid = "yearly"\nchannel = "web"\nchat = "c1"\ncron = "0 9 1 1 *"\ntimezone = "UTC"\nprompt = "happy new year"\n`,
    );
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await d?.stop();
  });

  it("lists each schedule's next firing and the reminders' next, live after /remind", async () => {
    const page = await browser.newPage();
    await page.goto(`${d.url}/admin`);
    const schedule = page.locator('tr[data-firing="schedule:yearly"]');
    await schedule.waitFor();
    // 1 January 09:00 UTC next year, as the browser writes a date.
    const next = await page.evaluate((ms) => new Date(ms).toLocaleString(), Date.UTC(new Date().getUTCFullYear() + 1, 0, 1, 9));
    expect(await schedule.textContent()).toContain('schedule yearly');
    expect(await schedule.locator('td').nth(2).textContent()).toBe(next);
    await page.waitForSelector('tr[data-firing="reminders"]:has-text("0 pending")');
    expect(await page.textContent('tr[data-firing="reminders"]')).toContain('never');

    const c = new ChatClient(d.url, 'tab-firings');
    await c.opened;
    c.send('/remind in 2h call the plumber');
    await c.finals();
    // The page hears of the change over its event stream and draws the section again.
    await page.waitForSelector('tr[data-firing="reminders"]:has-text("1 pending")');
    expect(await page.textContent('tr[data-firing="reminders"]')).not.toContain('never');
    await page.close();
  });
});
