import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import type { Page } from 'playwright-core';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { WebchatAdapter } from '../../channels/webchat/adapter.js';
import type { ChannelMessage } from '../../src/contracts/message.js';
import { HttpServer } from '../../src/observe/http-server.js';
import { chromiumPages, hasChromium } from '../helpers/browser.js';
import { waitFor } from '../helpers/daemon.js';

/** A web chat adapter on a real HTTP server whose deliver refuses `refuse` texts once each; listen again with relisten(). */
async function start(o: { refuse?: Set<string>; heartbeatMs?: number } = {}) {
  const http = new HttpServer();
  const { port } = await http.listen('127.0.0.1', 0);
  const stateDir = mkdtempSync(join(tmpdir(), 'webchat-err-'));
  const delivered: ChannelMessage[] = [];
  const refused: string[] = [];
  let stop = new AbortController();
  let listening: Promise<void> = Promise.resolve();
  let adapter!: WebchatAdapter;
  const listen = async () => {
    stop = new AbortController();
    adapter = new WebchatAdapter({
      id: 'web',
      http,
      log: pino({ level: 'silent' }),
      stateDir,
      maxAttachmentBytes: () => 1000,
      ...(o.heartbeatMs ? { heartbeatMs: o.heartbeatMs } : {}),
    });
    let up!: () => void;
    const connected = new Promise<void>((r) => (up = r));
    listening = adapter.listen(
      async (m) => {
        if (o.refuse?.delete(m.text)) {
          refused.push(m.text);
          throw new Error('storage refused it');
        }
        delivered.push(m);
        return true;
      },
      stop.signal,
      () => up(),
    );
    await connected;
  };
  await listen();
  const unlisten = async () => {
    stop.abort();
    await listening;
  };
  return {
    base: `http://127.0.0.1:${port}`,
    delivered,
    refused,
    /** The adapter listening now (a new one after relisten). */
    adapter: () => adapter,
    /** The channel stops (its sockets close) and starts again: the page reconnects. */
    relisten: async () => {
      await unlisten();
      await listen();
    },
    close: async () => {
      await unlisten();
      await http.close();
      rmSync(stateDir, { recursive: true, force: true });
    },
  };
}

type Started = Awaited<ReturnType<typeof start>>;

/**
 * From now on the page records every text #status takes (window.statusTexts): "reconnecting…"
 * lasts only until the page's retry (500 ms), so a slow test process could miss it on screen.
 */
async function recordStatus(page: Page): Promise<void> {
  await page.evaluate(`window.statusTexts = [];
    new MutationObserver((records) => {
      for (const r of records)
        if (r.type === 'characterData') window.statusTexts.push(r.target.textContent);
        else for (const n of r.addedNodes) window.statusTexts.push(n.textContent);
    }).observe(document.getElementById('status'), { childList: true, characterData: true, subtree: true });`);
}

/** Waits until the recorded #status texts hold ones starting with `texts`, in this order. */
async function statusSequence(page: Page, ...texts: string[]): Promise<void> {
  await page.waitForFunction((want) => {
    let i = 0;
    for (const t of (globalThis as unknown as { statusTexts: string[] }).statusTexts) if (i < want.length && t.startsWith(want[i]!)) i++;
    return i === want.length;
  }, texts);
}

describe('web chat: errors name their message; heartbeat', () => {
  const { newPage } = chromiumPages();
  let s: Started | undefined;
  afterEach(async () => {
    await s?.close();
    s = undefined;
  });
  const texts = () => s!.delivered.map((m) => m.text);

  it.runIf(hasChromium)('a message the daemon refused is marked failed with Retry, never resent on its own after a reconnect', async () => {
    s = await start({ refuse: new Set(['refused one']) });
    const page = await newPage();
    await page.goto(`${s.base}/`);
    await page.waitForSelector('#status:text("connected")');
    await page.fill('#input', 'refused one');
    await page.press('#input', 'Enter');
    const failed = page.locator('.msg.me.failed', { hasText: 'refused one' });
    await failed.waitFor();
    expect(await failed.locator('.note').textContent()).toContain('could not take this message');
    await page.fill('#input', 'next one');
    await page.press('#input', 'Enter');
    await waitFor(() => texts().includes('next one'));

    // The socket drops and comes back: the refused message stays failed, not silently sent.
    await recordStatus(page);
    await s.relisten();
    await statusSequence(page, 'reconnecting', 'connected');
    await page.fill('#input', 'after the reconnect');
    await page.press('#input', 'Enter');
    await waitFor(() => texts().includes('after the reconnect'));
    expect(texts()).toEqual(['next one', 'after the reconnect']);
    expect(await failed.count()).toBe(1);

    // The user's choice: Retry sends it (same id), once.
    await failed.locator('button.retry').click();
    await waitFor(() => texts().includes('refused one'));
    await page.locator('.msg.me:not(.failed):not(.unsent)', { hasText: 'refused one' }).waitFor();
    expect(texts()).toEqual(['next one', 'after the reconnect', 'refused one']);
    expect(s.refused).toEqual(['refused one']);
  });

  it.runIf(hasChromium)('"typing…" is cleared when the page reconnects', async () => {
    s = await start();
    const page = await newPage();
    await page.goto(`${s.base}/`);
    await page.waitForSelector('#status:text("connected")');
    await page.fill('#input', 'hello');
    await page.press('#input', 'Enter');
    const chatId = (await waitFor(() => s!.delivered[0])).chat.id;
    await s.adapter().typing({ channelId: 'web', chatId, chatType: 'dm' });
    await page.locator('.typing').waitFor();
    // The turn that was typing may never answer this socket: a reconnect starts clean.
    await recordStatus(page);
    await s.relisten();
    await statusSequence(page, 'reconnecting', 'connected');
    expect(await page.locator('.typing').count()).toBe(0);
  });

  it('an error frame for a refused message carries its id', async () => {
    s = await start({ refuse: new Set(['nope']) });
    const ws = new WebSocket(`${s.base.replace('http', 'ws')}/chat?tab=t1`);
    const frames: Array<{ type: string; id?: string }> = [];
    ws.on('message', (d) => frames.push(JSON.parse(String(d))));
    await new Promise((r) => ws.once('open', r));
    ws.send(JSON.stringify({ type: 'message', id: 'm-1', text: 'nope' }));
    const error = await waitFor(() => frames.find((f) => f.type === 'error'));
    expect(error.id).toBe('m-1');
    ws.close();
  });

  it('a socket that answers no pings is dropped after two intervals; one that answers stays', async () => {
    s = await start({ heartbeatMs: 50 });
    const url = `${s.base.replace('http', 'ws')}/chat?tab=`;
    const silent = new WebSocket(`${url}silent`, { autoPong: false });
    const alive = new WebSocket(`${url}alive`);
    await Promise.all([silent, alive].map((w) => new Promise((r) => w.once('open', r))));
    let aliveClosed = false;
    alive.once('close', () => (aliveClosed = true));
    await new Promise((r) => silent.once('close', r));
    expect(aliveClosed).toBe(false);
    expect(alive.readyState).toBe(WebSocket.OPEN);
    alive.close();
  });
});
