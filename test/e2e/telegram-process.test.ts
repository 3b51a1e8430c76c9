import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeLlm } from '../fakes/llm/server.js';
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
    const llm = new FakeLlm();
    await llm.start();
    cleanup.push(() => llm.close());
    const dir = mkdtempSync(join(tmpdir(), 'channeld-tgproc-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'daemon.config.toml');
    writeFileSync(
      file,
      `[daemon]\nstate_dir = "${join(dir, 'state')}"\n[http]\nlisten = "127.0.0.1:0"\n[agent]\nprovider = "openai-compatible"\nbase_url = "${llm.url}"\nmodel = "m"\n\n[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG_TOKEN"\napi_root = "${tg.url}"\nallow_from = ["*"]\nnative_drafts = false\n`,
    );
    const env = { TG_TOKEN: tg.token };
    const words = Array.from({ length: 30 }, (_, i) => `w${i} `);
    const text = words.join('').trim();
    // The first process's model writes all but the last word and then stalls: the turn is
    // mid-stream whenever the kill lands, however slow this machine is. The restarted
    // process's request gets the fake's default answer, the whole text.
    llm.script({ kind: 'stall', chunks: words.slice(0, -1).map((content) => ({ content, delayMs: 100 })) });
    const p1 = new DaemonProcess(file, env);
    cleanup.push(() => p1.child.kill('SIGKILL'));
    tg.dm(text);
    // An edit means the first message's id was committed before it (the kill cannot fall in
    // the window between Telegram accepting a message and the commit of its id).
    await waitFor(() => tg.messages.length === 1 && tg.messages[0]!.edits >= 1, 15_000);
    p1.signal('SIGKILL');
    await p1.exited;
    expect(tg.texts(42)[0]).not.toBe(text);

    const p2 = new DaemonProcess(file, env);
    cleanup.push(() => p2.child.kill('SIGKILL'));
    const url = await p2.url();
    await waitFor(() => tg.texts(42)[0] === text, 15_000);
    // Settled: every update is confirmed (so delivered, stored or recognised as a duplicate)
    // and no turn is running or queued, so nothing can send another message.
    await waitFor(async () => tg.pendingUpdates === 0 && ((await (await fetch(`${url}/status`)).json()) as { turns: { list: unknown[] } }).turns.list.length === 0);
    expect(tg.callsOf('sendMessage')).toHaveLength(1);
    expect(tg.texts(42)).toEqual([text]);
    expect(llm.requests).toHaveLength(2);
    expect(p2.lines.some((l) => l.msg === 'recovered unfinished messages from the inbox')).toBe(true);
    p2.signal('SIGTERM');
    expect(await p2.exited).toBe(0);
  });
});
