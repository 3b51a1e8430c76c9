import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

/** Debian's chromium, as .ci/run installs it (CHROMIUM_PATH overrides). */
export const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const hasChromium = existsSync(chromiumPath);

// Under CI the browser tests must run, never skip quietly.
if (process.env.CI && !hasChromium) throw new Error(`CI needs ${chromiumPath}: .ci/run installs Debian's chromium package`);

/** Headless Chromium with the flags this closed network needs (no background requests). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}
