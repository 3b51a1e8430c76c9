import type { Browser } from 'playwright-core';
import { hasChromium, launchChromium } from '../helpers/browser.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, type TestDaemon } from '../helpers/daemon.js';

describe.runIf(hasChromium)('web chat page in headless Chromium (skipped where /usr/bin/chromium is missing)', () => {
  let d: TestDaemon;
  let browser: Browser;
  beforeAll(async () => {
    d = await startDaemon(`[agent]\nprovider = "echo"\necho_delay_ms = 80\n\n[[channels]]\nid = "web"\ntype = "webchat"\n`);
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await d?.stop();
  });

  it('types a message and sees the answer stream in, then marked final', async () => {
    const page = await browser.newPage({ viewport: { width: 1000, height: 700 } });
    await page.goto(`${d.url}/`);
    await page.waitForSelector('#status:text("connected")');
    // A draft shows up before the end: the cursor class is on while the model writes. The page
    // itself records it, so a slow test process cannot miss a draft that was there.
    await page.evaluate(`window.sawDraft = false;
      new MutationObserver(() => { if (document.querySelector('.msg.bot.draft')) window.sawDraft = true; })
        .observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });`);
    await page.fill('#input', 'streamed back to the browser word by word');
    await page.click('#send');
    const final = await page.waitForSelector('.msg.bot.final');
    expect(await page.evaluate('window.sawDraft')).toBe(true);
    expect(await final.textContent()).toBe('streamed back to the browser word by word');
    expect(await page.locator('.msg.me').textContent()).toBe('streamed back to the browser word by word');
    await page.close();
  });

  it('works at phone width: nothing overflows sideways, Enter sends', async () => {
    const page = await browser.newPage({ viewport: { width: 375, height: 667 }, isMobile: true });
    await page.goto(`${d.url}/`);
    await page.waitForSelector('#status:text("connected")');
    await page.fill('#input', 'a phone sized hello');
    await page.press('#input', 'Enter');
    const final = await page.waitForSelector('.msg.bot.final');
    expect(await final.textContent()).toBe('a phone sized hello');
    const overflow = (await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth')) as number;
    expect(overflow).toBeLessThanOrEqual(0);
    await page.screenshot({ path: `${d.dir}/phone.png` });
    await page.close();
  });
});
