import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { say, withCountingFile } from '../helpers/approval.js';
import { hasChromium, launchChromium } from '../helpers/browser.js';
import { waitFor } from '../helpers/daemon.js';
import { withChannelDaemon, withLlm } from '../helpers/fixtures.js';
import { firstMcpConnected } from '../helpers/mcp.js';
import { llmAgent, webchatChannel } from '../helpers/toml.js';

describe.runIf(hasChromium)(
  'MCP in the browser: web chat approval buttons and the /admin table (headless Chromium, real server-filesystem; skipped where /usr/bin/chromium is missing)',
  () => {
    let browser: Browser;
    beforeAll(async () => {
      browser = await launchChromium();
    });
    afterAll(async () => {
      await browser?.close();
    });

    it('the question shows Approve and Deny; a click runs the call once and the question becomes its outcome', async () => {
      const llm = await withLlm();
      const file = withCountingFile();
      const d = await withChannelDaemon(llmAgent(llm.url) + file.server() + webchatChannel(), {});
      await firstMcpConnected(d);
      llm.script(file.edit(), say('Edited from the page.'));
      const page = await browser.newPage();
      page.on('pageerror', (err) => {
        throw err;
      });
      await page.goto(`${d.url}/`);
      await page.waitForSelector('#status:text("connected")');
      await page.fill('#input', 'edit the count');
      await page.click('#send');
      const question = page.locator('.msg.bot', { has: page.locator('button.choice') });
      await question.waitFor();
      expect(await question.locator('button.choice').allTextContents()).toEqual(['Approve', 'Deny']);
      expect(await question.textContent()).toContain('fs__edit_file');
      expect(file.runs).toBe(0);

      await question.locator('button.choice', { hasText: 'Approve' }).click();
      await page.locator('.msg.bot.final', { hasText: 'Edited from the page.' }).waitFor();
      await waitFor(() => file.runs === 1, 10_000);
      // The question was edited into its outcome, its buttons gone; nothing ran twice.
      const outcome = page.locator('.msg.bot', { hasText: '✅ fs__edit_file: approved.' });
      await outcome.waitFor();
      expect(await outcome.locator('button').count()).toBe(0);
      expect(await page.locator('button.choice').count()).toBe(0);
      expect(file.runs).toBe(1);
      await page.close();
    });

    it('/admin lists each MCP server with its transport, state and tool count', async () => {
      const llm = await withLlm();
      const file = withCountingFile();
      const d = await withChannelDaemon(llmAgent(llm.url) + file.server() + webchatChannel(), {});
      await firstMcpConnected(d);
      const page = await browser.newPage();
      page.on('pageerror', (err) => {
        throw err;
      });
      await page.goto(`${d.url}/admin`);
      const row = page.locator('tr[data-mcp="default/fs"]');
      await row.locator('.state.connected').waitFor();
      const cells = await row.locator('td').allTextContents();
      expect(cells.slice(0, 4)).toEqual(['default', 'fs', 'stdio', 'connected']);
      // server-filesystem offers a dozen or so tools; the count is the daemon's, shown as is.
      const tools = (d.daemon.status() as { mcp_servers: Array<{ tools: number }> }).mcp_servers[0]!.tools;
      expect(tools).toBeGreaterThan(0);
      expect(cells[4]).toBe(String(tools));
      expect(cells[6]).toBe('—');
      await page.close();
    });
  },
);
