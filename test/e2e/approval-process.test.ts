import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { McpServerStatus } from '../../src/mcp/server.js';
import { FakeLlm } from '../fakes/llm/server.js';
import { FakeTelegram, visibleText } from '../fakes/telegram/server.js';
import { CountingFile, say } from '../helpers/approval.js';
import { waitFor } from '../helpers/daemon.js';
import { DaemonProcess } from '../helpers/process.js';

describe('approval across a crash (daemon as a real process)', () => {
  const cleanup: Array<() => unknown> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  it('kill -9 while waiting for approval: after the restart it asks again, and the tool runs exactly once', async () => {
    const tg = new FakeTelegram();
    await tg.start();
    cleanup.push(() => tg.close());
    const llm = new FakeLlm();
    await llm.start();
    cleanup.push(() => llm.close());
    const file = new CountingFile();
    cleanup.push(() => rmSync(file.dir, { recursive: true, force: true }));
    const config = join(file.dir, 'daemon.config.toml');
    writeFileSync(
      config,
      `[daemon]\nstate_dir = "${join(file.dir, 'state')}"\n[http]\nlisten = "127.0.0.1:0"\n` +
        `[agent]\nprovider = "openai-compatible"\nbase_url = "${llm.url}"\nmodel = "m"\n\n` +
        file.server() +
        `[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG_TOKEN"\napi_root = "${tg.url}"\nallow_from = ["*"]\nnative_drafts = false\n`,
    );
    const env = { TG_TOKEN: tg.token };
    const mcpPids: number[] = [];
    cleanup.push(() => {
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
      const s = await waitFor(async () => ((await (await fetch(`${url}/status`)).json()) as { mcp_servers: McpServerStatus[] }).mcp_servers.find((m) => m.state === 'connected'), 30_000, 50);
      mcpPids.push(s.pid!);
    };

    // The first run and the re-run after the crash each call the tool; then the answer.
    llm.script(file.edit(), file.edit(), say('Edited once.'));
    const p1 = new DaemonProcess(config, env);
    cleanup.push(() => p1.child.kill('SIGKILL'));
    await fsConnected(p1);
    tg.dm('edit the count');
    const first = await waitFor(() => tg.messages.find((m) => m.replyMarkup), 20_000);
    // Killed once the question's message id is committed (the log line follows the commit).
    await waitFor(() => p1.lines.some((l) => l.msg === 'tool call waiting for approval'), 20_000);
    p1.signal('SIGKILL');
    await p1.exited;
    expect(file.runs).toBe(0);

    const p2 = new DaemonProcess(config, env);
    cleanup.push(() => p2.child.kill('SIGKILL'));
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
