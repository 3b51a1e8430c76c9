import { describe, expect, it, onTestFinished } from 'vitest';
import type { McpServerStatus } from '../../src/mcp/server.js';
import { visibleText } from '../fakes/telegram/server.js';
import { say, withCountingFile } from '../helpers/approval.js';
import { waitFor } from '../helpers/daemon.js';
import { withLlm } from '../helpers/fixtures.js';
import { telegramChannel, telegramEnv, withTelegram } from '../helpers/platforms.js';
import { withDaemonProcess, writeProcessConfig, type DaemonProcess } from '../helpers/process.js';
import { llmAgent } from '../helpers/toml.js';

describe('approval across a crash (daemon as a real process)', () => {
  it('kill -9 while waiting for approval: after the restart it asks again, and the tool runs exactly once', async () => {
    const tg = await withTelegram();
    const llm = await withLlm();
    const file = withCountingFile();
    const config = writeProcessConfig(file.dir, llmAgent(llm.url) + file.server() + telegramChannel(tg));
    const env = telegramEnv(tg);
    const mcpPids: number[] = [];
    onTestFinished(() => {
      for (const pid of mcpPids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          /* already gone */
        }
      }
    });
    const fsConnected = async (p: DaemonProcess) => {
      const url = await p.url();
      const s = await waitFor(
        async () => ((await (await fetch(`${url}/status`)).json()) as { mcp_servers: McpServerStatus[] }).mcp_servers.find((m) => m.state === 'connected'),
        30_000,
        50,
      );
      mcpPids.push(s.pid!);
    };

    // The first run and the re-run after the crash each call the tool; then the answer.
    llm.script(file.edit(), file.edit(), say('Edited once.'));
    const p1 = withDaemonProcess(config, env);
    await fsConnected(p1);
    tg.dm('edit the count');
    const first = await waitFor(() => tg.messages.find((m) => m.replyMarkup), 20_000);
    // Killed once the question's message id is committed (the log line follows the commit).
    await waitFor(() => p1.lines.some((l) => l.msg === 'tool call waiting for approval'), 20_000);
    p1.signal('SIGKILL');
    await p1.exited;
    expect(file.runs).toBe(0);

    const p2 = withDaemonProcess(config, env);
    await fsConnected(p2);
    // The recovered turn asks again with a new question; the old one says so.
    const second = await waitFor(() => tg.messages.find((m) => m.replyMarkup && m !== first), 30_000);
    expect(visibleText(first.text, first.parseMode)).toBe('🔐 fs__edit_file: asked again below after a restart.');
    expect(first.replyMarkup).toBeUndefined();
    tg.click(second, 'Approve');
    await waitFor(() => tg.texts(42).includes('Edited once.'), 20_000);
    expect(file.runs).toBe(1);
    p2.signal('SIGTERM');
    expect(await p2.exited).toBe(0);
    expect(file.runs).toBe(1);
  }, 120_000);
});
