import type { Browser, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { hasChromium, launchChromium } from '../helpers/browser.js';
import { startDaemon, type TestDaemon } from '../helpers/daemon.js';
import { withLlm } from '../helpers/fixtures.js';
import { llmAgent, webchatChannel } from '../helpers/toml.js';

const body = (extra = '') => `[agent]\nprovider = "echo"\necho_delay_ms = 20\n\n[[channels]]\nid = "web"\ntype = "webchat"\n${extra}`;

describe.runIf(hasChromium)('web chat page: token prompt, history on reload, Markdown (headless Chromium; skipped where /usr/bin/chromium is missing)', () => {
  let d: TestDaemon | undefined;
  let browser: Browser;
  const pages: Page[] = [];
  beforeAll(async () => {
    browser = await launchChromium();
  });
  afterEach(async () => {
    for (const p of pages.splice(0)) await p.close();
    await d?.stop();
    d = undefined;
  });
  afterAll(async () => {
    await browser?.close();
  });
  const open = async (url: string) => {
    const page = await browser.newPage({ viewport: { width: 900, height: 700 } });
    pages.push(page);
    page.on('pageerror', (err) => {
      throw err;
    });
    await page.goto(url);
    return page;
  };
  const say = async (page: Page, text: string, finals: number) => {
    await page.fill('#input', text);
    await page.click('#send');
    // Locators, not string predicates: the page's CSP (script-src 'self') refuses eval.
    await page
      .locator('.msg.bot.final')
      .nth(finals - 1)
      .waitFor({ timeout: 15_000 });
  };

  it('asks for the token on 127.0.0.1 when the server requires one, then chats', async () => {
    d = await startDaemon(body('access_token_env = "WEB_TOKEN"\n'), { WEB_TOKEN: 'open-sesame-17' });
    const page = await open(`${d.url}/`);
    await page.waitForSelector('#auth.shown');
    expect(await page.textContent('#status')).toBe('needs a token');
    await page.fill('#token', 'wrong-token');
    await page.click('#token-ok');
    await page.waitForSelector('#auth.shown #auth-msg:text("refused")');
    await page.fill('#token', 'open-sesame-17');
    await page.click('#token-ok');
    await page.waitForSelector('#status:text("connected")');
    expect(await page.isVisible('#auth')).toBe(false);
    await say(page, 'hello with a token', 1);
    expect(await page.textContent('.msg.bot.final')).toBe('hello with a token');
  });

  it('says why when this tab already holds too many connections (a 429 the page cannot see), and connects once one closes', async () => {
    d = await startDaemon(body());
    const page = await browser.newPage({ viewport: { width: 900, height: 700 } });
    pages.push(page);
    // The page's tab id, known beforehand: its duplicates' sockets are opened from here.
    await page.addInitScript(() => {
      try {
        sessionStorage.setItem('channeld.tab', 'crowded-tab');
      } catch {
        // about:blank has no storage.
      }
    });
    const sockets: WebSocket[] = [];
    for (let i = 0; i < 8; i++) {
      const ws = new WebSocket(`${d.url.replace('http', 'ws')}/chat?tab=crowded-tab`);
      await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
      sockets.push(ws);
    }
    await page.goto(`${d.url}/`);
    await page.waitForSelector('#notice:text("refuses more connections")', { timeout: 15_000 });
    expect(await page.textContent('#notice')).toContain('a tab may hold 8 connections at once');
    expect(await page.isVisible('#auth')).toBe(false);
    await new Promise((resolve) => sockets.pop()!.once('close', resolve).close());
    await page.waitForSelector('#status:text("connected")', { timeout: 30_000 });
    expect(await page.isVisible('#notice')).toBe(false);
    for (const ws of sockets) ws.close();
  });

  it('a reloaded tab shows both sides of the conversation, in order', async () => {
    d = await startDaemon(body());
    const page = await open(`${d.url}/`);
    await page.waitForSelector('#status:text("connected")');
    await say(page, 'first question', 1);
    await say(page, 'second question', 2);
    await page.reload();
    await page.waitForSelector('#status:text("connected")');
    await page.locator('#log .msg').nth(3).waitFor();
    const log = await page.$$eval('#log .msg', (els) => els.map((e) => `${e.classList.contains('me') ? 'me' : 'bot'}: ${e.textContent}`));
    expect(log).toEqual(['me: first question', 'bot: first question', 'me: second question', 'bot: second question']);
  });

  it('renders Markdown (bold, a fenced code block with a copy button) and keeps raw HTML as text', async () => {
    d = await startDaemon(body());
    const page = await open(`${d.url}/`);
    await page.waitForSelector('#status:text("connected")');
    await say(page, 'This is **bold** and `inline`.\n\n```js\nconst x = 1;\n```\n', 1);
    const bubble = page.locator('.msg.bot.final').last();
    expect(await bubble.locator('strong').textContent()).toBe('bold');
    expect(await bubble.locator('p code').textContent()).toBe('inline');
    expect(await bubble.locator('pre code.language-js').textContent()).toBe('const x = 1;\n');
    const font = await bubble
      .locator('pre code')
      .evaluate((el) => (globalThis as unknown as { getComputedStyle(e: unknown): { fontFamily: string } }).getComputedStyle(el).fontFamily);
    expect(font).toMatch(/mono|Menlo|Consolas/i);
    expect(await bubble.locator('.code button.copy').textContent()).toBe('Copy');
    expect(await bubble.textContent()).not.toContain('**');

    await say(page, 'look <img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script>', 2);
    const evil = page.locator('.msg.bot.final').last();
    expect(await evil.textContent()).toContain('<img src=x onerror="window.__pwned=1">');
    expect(await evil.locator('img, script').count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as { __pwned?: number }).__pwned)).toBeUndefined();
  });

  it('renders the live draft as Markdown while it streams', async () => {
    // The model holds the rest of its answer until the test has seen the draft.
    const llm = await withLlm();
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    llm.script({ kind: 'stream', chunks: [{ content: '**early** words ' }, { content: 'then the rest', after: released }] });
    d = await startDaemon(llmAgent(llm.url) + webchatChannel());
    const page = await open(`${d.url}/`);
    await page.waitForSelector('#status:text("connected")');
    await page.fill('#input', 'say something bold');
    await page.click('#send');
    await page.waitForSelector('.msg.bot.draft strong');
    expect(await page.textContent('.msg.bot.draft strong')).toBe('early');
    release();
    await page.waitForSelector('.msg.bot.final:has-text("then the rest")');
  });
});
