import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { withLlm, withTempDir } from '../helpers/fixtures.js';
import { telegramChannel, telegramEnv, withTelegram } from '../helpers/platforms.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { llmAgent } from '../helpers/toml.js';

describe('Telegram, daemon as a real process', () => {
  it('kill -9 mid-turn, start again: exactly one final answer, in the message that already existed', async () => {
    const tg = await withTelegram();
    const llm = await withLlm();
    const file = writeProcessConfig(withTempDir('tgproc'), llmAgent(llm.url) + telegramChannel(tg));
    const env = telegramEnv(tg);
    const words = Array.from({ length: 30 }, (_, i) => `w${i} `);
    const text = words.join('').trim();
    // The first process's model writes all but the last word and then stalls: the turn is
    // mid-stream whenever the kill lands, however slow this machine is. The restarted
    // process's request gets the fake's default answer, the whole text.
    llm.script({ kind: 'stall', chunks: words.slice(0, -1).map((content) => ({ content, delayMs: 100 })) });
    const p1 = withDaemonProcess(file, env);
    tg.dm(text);
    // An edit means the first message's id was committed before it (the kill cannot fall in
    // the window between Telegram accepting a message and the commit of its id).
    await waitFor(() => tg.messages.length === 1 && tg.messages[0]!.edits >= 1, 15_000);
    p1.signal('SIGKILL');
    await p1.exited;
    expect(tg.texts(42)[0]).not.toBe(text);

    const p2 = withDaemonProcess(file, env);
    const url = await p2.url();
    await waitFor(() => tg.texts(42)[0] === text, 15_000);
    // Settled: every update is confirmed (so delivered, stored or recognised as a duplicate)
    // and no turn is running or queued, so nothing can send another message.
    await waitFor(
      async () => tg.pendingUpdates === 0 && ((await (await fetch(`${url}/status`)).json()) as { turns: { list: unknown[] } }).turns.list.length === 0,
    );
    expect(tg.callsOf('sendMessage')).toHaveLength(1);
    expect(tg.texts(42)).toEqual([text]);
    expect(llm.requests).toHaveLength(2);
    expect(p2.lines.some((l) => l.msg === 'recovered unfinished messages from the inbox')).toBe(true);
    p2.signal('SIGTERM');
    expect(await p2.exited).toBe(0);
  });
});
