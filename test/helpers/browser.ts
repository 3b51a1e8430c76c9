import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { scaled } from './timing.js';

/** Debian's chromium, as .ci/run installs it (CHROMIUM_PATH overrides). */
export const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const hasChromium = existsSync(chromiumPath);

// Under CI the browser tests must run, never skip quietly.
if (process.env.CI && !hasChromium) throw new Error(`CI needs ${chromiumPath}: .ci/run installs Debian's chromium package`);

/** Playwright's waits (selectors, navigation, clicks), stretched like every other test wait. */
export const browserTimeoutMs = scaled(15_000);

/**
 * Headless Chromium with the flags this closed network needs (no background requests). Every
 * page it opens waits up to `browserTimeoutMs` by default, so browser waits follow the test
 * time scale too.
 */
export async function launchChromium(): Promise<Browser> {
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    timeout: browserTimeoutMs,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const newPage = browser.newPage.bind(browser);
  browser.newPage = async (options) => {
    const page = await newPage(options);
    page.setDefaultTimeout(browserTimeoutMs);
    return page;
  };
  return browser;
}

/**
 * One Chromium for the calling describe block (launched where it is installed), and its
 * pages: each test's are closed after it, and an error thrown in a page fails the test.
 */
export function chromiumPages(): { newPage: () => Promise<Page> } {
  let browser: Browser | undefined;
  const pages: Page[] = [];
  beforeAll(async () => {
    if (hasChromium) browser = await launchChromium();
  });
  afterEach(async () => {
    for (const p of pages.splice(0)) await p.close();
  });
  afterAll(async () => {
    await browser?.close();
  });
  return {
    newPage: async () => {
      if (!browser) throw new Error(`no Chromium at ${chromiumPath}`);
      const page = await browser.newPage({ viewport: { width: 900, height: 700 } });
      pages.push(page);
      page.on('pageerror', (err) => {
        throw err;
      });
      return page;
    },
  };
}
