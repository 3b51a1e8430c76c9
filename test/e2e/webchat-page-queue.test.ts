import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterEach, describe, expect, it } from 'vitest';
import { Daemon } from '../../src/daemon/daemon.js';
import { chromiumPages, hasChromium } from '../helpers/browser.js';
import { header, LogSink, startDaemon, type TestDaemon } from '../helpers/daemon.js';
import { withLlm } from '../helpers/fixtures.js';
import { kinds } from '../helpers/kinds.js';
import { fixedFreePort } from '../helpers/ports.js';
import { llmAgent, webchatChannel } from '../helpers/toml.js';

const body = `[agent]\nprovider = "echo"\necho_delay_ms = 20\n\n[[channels]]\nid = "web"\ntype = "webchat"\n`;

/** A daemon on a fixed port and state dir, so a page keeps its origin (and sessionStorage) across a restart. */
async function daemonOn(dir: string, port: number): Promise<Daemon> {
  const configFile = join(dir, 'daemon.config.toml');
  writeFileSync(configFile, header(dir).replace('listen = "127.0.0.1:0"', `listen = "127.0.0.1:${port}"`) + body);
  return Daemon.start({ configFile, kinds, env: {}, logger: { destination: new LogSink(), level: 'debug', pretty: false } });
}

describe.runIf(hasChromium)('web chat page: unsent messages, order, refusals (headless Chromium; skipped where /usr/bin/chromium is missing)', () => {
  const { newPage } = chromiumPages();
  let d: TestDaemon | undefined;
  const daemons: Daemon[] = [];
  const dirs: string[] = [];
  afterEach(async () => {
    await d?.stop();
    d = undefined;
    for (const daemon of daemons.splice(0)) await daemon.stop();
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  const botTexts = (page: Page) => page.$$eval('#log .msg.bot.final', (els) => els.map((e) => e.textContent ?? ''));

  it('a message typed while the daemon is down is marked unsent, survives a reload, and is answered once after the restart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'channeld-test-'));
    dirs.push(dir);
    // Outside the ephemeral range: another test's listen(0) cannot take it while the daemon is down.
    const port = await fixedFreePort();
    const first = await daemonOn(dir, port);
    const page = await newPage();
    // While `offline`, the page's sockets are closed at once (as a daemon that is down would),
    // so the reload below, not a reconnect of the old page, is what sends the message again.
    let offline = false;
    await page.routeWebSocket(/\/chat/, (ws) => (offline ? ws.close() : ws.connectToServer()));
    await page.goto(`http://127.0.0.1:${port}/`);
    await page.waitForSelector('#status:text("connected")');
    offline = true;
    await first.stop();
    await page.waitForSelector('#status:text("reconnecting")');

    await page.fill('#input', 'typed while offline');
    await page.press('#input', 'Enter');
    const bubble = page.locator('.msg.me', { hasText: 'typed while offline' });
    await bubble.and(page.locator('.unsent')).waitFor();
    expect(await bubble.locator('.note').textContent()).toBe('not sent yet');

    // The daemon restarts; the page is reloaded before its socket gets through: the message is shown again, unsent.
    daemons.push(await daemonOn(dir, port));
    await page.reload();
    await page.locator('.msg.me.unsent.restored', { hasText: 'typed while offline' }).waitFor();
    offline = false;
    await page.locator('.msg.bot.final', { hasText: 'typed while offline' }).waitFor();
    await page.locator('.msg.me:not(.unsent)', { hasText: 'typed while offline' }).waitFor();
    // A later message's answer: by then a second answer to the first would have come too.
    await page.fill('#input', 'and then this');
    await page.press('#input', 'Enter');
    await page.locator('.msg.bot.final', { hasText: 'and then this' }).waitFor();
    expect(await botTexts(page)).toEqual(['typed while offline', 'and then this']);
    expect(await page.locator('.msg.me', { hasText: 'typed while offline' }).count()).toBe(1);
    expect(await page.locator('.msg .note').count()).toBe(0);
  });

  it('a message typed while the one before it uploads a file waits for it: stored and answered in order', async () => {
    d = await startDaemon(body);
    const page = await newPage();
    // The upload is held until the second message was submitted: a slow upload, made certain.
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let uploading!: () => void;
    const uploadStarted = new Promise<void>((r) => (uploading = r));
    await page.route('**/upload?**', async (route) => {
      uploading();
      await released;
      await route.continue();
    });
    await page.goto(`${d.url}/`);
    await page.waitForSelector('#status:text("connected")');
    await page.setInputFiles('#file', { name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('some notes\n'.repeat(1000)) });
    await page.fill('#input', 'first A');
    await page.press('#input', 'Enter');
    await uploadStarted;
    await page.fill('#input', 'second B');
    await page.press('#input', 'Enter');
    await page.locator('.msg.me', { hasText: 'second B' }).waitFor();
    release();
    await page.locator('.msg.bot.final').nth(1).waitFor();
    const answers = await botTexts(page);
    expect(answers[0]).toContain('first A');
    expect(answers[1]).toContain('second B');
    // What the daemon stored, in its order: the reloaded tab's backlog.
    await page.reload();
    await page.locator('#log .msg').nth(3).waitFor();
    const mine = await page.$$eval('#log .msg.me', (els) => els.map((e) => e.textContent));
    expect(mine).toEqual(['first A', 'second B']);
  });

  it('a page the socket would refuse (no token, a proxied client) says why and what to set, instead of reconnecting forever', async () => {
    d = await startDaemon(body);
    const page = await newPage();
    await page.setExtraHTTPHeaders({ 'X-Forwarded-For': '203.0.113.7' });
    await page.goto(`${d.url}/`);
    await page.locator('#notice').waitFor();
    expect(await page.textContent('#notice')).toContain('access_token_env');
    expect(await page.textContent('#status')).toBe('refused');
  });

  it('Enter during an IME composition does not send; an answer is aria-busy until it is final', async () => {
    // The model holds the rest of its answer until the test has seen the draft: a draft for as long as it looks.
    const llm = await withLlm();
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    llm.script({ kind: 'stream', chunks: [{ content: 'an answer with several words ' }, { content: 'to stream', after: released }] });
    d = await startDaemon(llmAgent(llm.url) + webchatChannel());
    const page = await newPage();
    await page.goto(`${d.url}/`);
    await page.waitForSelector('#status:text("connected")');
    await page.fill('#input', '日本');
    await page.dispatchEvent('#input', 'keydown', { key: 'Enter', isComposing: true, bubbles: true, cancelable: true });
    await page.fill('#input', '日本語 with several words to stream');
    await page.press('#input', 'Enter');
    await page.locator('.msg.bot.draft[aria-busy="true"]', { hasText: 'several words' }).waitFor();
    release();
    await page.locator('.msg.bot.final[aria-busy="false"]', { hasText: 'to stream' }).waitFor();
    expect(await page.$$eval('#log .msg.me', (els) => els.map((e) => e.textContent))).toEqual(['日本語 with several words to stream']);
  });
});
