import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeTelegram } from '../fakes/telegram/server.js';
import { waitFor } from '../helpers/daemon.js';
import { DaemonProcess } from '../helpers/process.js';

describe('Telegram, daemon as a real process', () => {
  const cleanup: Array<() => unknown> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  it('kill -9 mid-turn, start again: exactly one final answer, in the message that already existed', async () => {
    const tg = new FakeTelegram();
    await tg.start();
    cleanup.push(() => tg.close());
    const dir = mkdtempSync(join(tmpdir(), 'channeld-tgproc-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'daemon.config.toml');
    writeFileSync(
      file,
      `[daemon]\nstate_dir = "${join(dir, 'state')}"\n[http]\nlisten = "127.0.0.1:0"\n[agent]\nprovider = "echo"\necho_delay_ms = 150\n\n[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG_TOKEN"\napi_root = "${tg.url}"\nallow_from = ["*"]\nnative_drafts = false\n`,
    );
    const env = { TG_TOKEN: tg.token };
    const p1 = new DaemonProcess(file, env);
    cleanup.push(() => p1.child.kill('SIGKILL'));
    const text = Array.from({ length: 30 }, (_, i) => `w${i}`).join(' ');
    tg.dm(text);
    // Killed once the draft was edited: its id was committed by then (a kill between the
    // platform accepting a message and that commit is the documented window no bot can close).
    await waitFor(() => tg.messages.length === 1 && tg.messages[0]!.edits >= 1, 10_000);
    p1.signal('SIGKILL');
    await p1.exited;
    expect(tg.texts(42)[0]).not.toBe(text);

    const p2 = new DaemonProcess(file, env);
    cleanup.push(() => p2.child.kill('SIGKILL'));
    await waitFor(() => tg.texts(42)[0] === text, 15_000);
    await new Promise((r) => setTimeout(r, 1500));
    expect(tg.callsOf('sendMessage')).toHaveLength(1);
    expect(tg.texts(42)).toEqual([text]);
    p2.signal('SIGTERM');
    expect(await p2.exited).toBe(0);
  });
});
