import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasChromium, launchChromium } from '../helpers/browser.js';
import { startDaemon, type TestDaemon } from '../helpers/daemon.js';

describe.runIf(hasChromium)('web chat page: attach button and drag-and-drop (headless Chromium; skipped where /usr/bin/chromium is missing)', () => {
  let d: TestDaemon;
  let browser: Browser;
  beforeAll(async () => {
    // The echo agent reads text only: the answer's note shows the file arrived as an attachment.
    d = await startDaemon(`[agent]\nprovider = "echo"\necho_delay_ms = 0\n\n[[channels]]\nid = "web"\ntype = "webchat"\n`);
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await d?.stop();
  });

  it('a file chosen with the attach button is uploaded and sent without text', async () => {
    const page = await browser.newPage();
    await page.goto(`${d.url}/`);
    await page.waitForSelector('#status:text("connected")');
    await page.setInputFiles('#file', { name: 'pic.png', mimeType: 'image/png', buffer: Buffer.from('89504e470d0a1a0a', 'hex') });
    expect(await page.textContent('#files')).toBe('Attached: pic.png');
    await page.click('#send');
    const final = await page.waitForSelector('.msg.bot.final');
    expect(await final.textContent()).toContain('echo reads text only, so it did not see pic.png.');
    expect(await page.textContent('#files')).toBe('');
    await page.close();
  });

  it('a file dropped on the page is attached', async () => {
    const page = await browser.newPage();
    await page.goto(`${d.url}/`);
    await page.waitForSelector('#status:text("connected")');
    // A string, so the test's types need no DOM library.
    await page.evaluate(`(() => {
      const dt = new DataTransfer();
      dt.items.add(new File(['a,b\\n1,2\\n'], 'table.csv', { type: 'text/csv' }));
      document.getElementById('log').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    })()`);
    expect(await page.textContent('#files')).toBe('Attached: table.csv');
    await page.fill('#input', 'sum it');
    await page.click('#send');
    const final = await page.waitForSelector('.msg.bot.final');
    // The echo repeats what the model would read: the caption, then the file as text.
    expect(await final.textContent()).toContain('<file name="table.csv">');
    await page.close();
  });
});
