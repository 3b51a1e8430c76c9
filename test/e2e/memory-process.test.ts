import { describe, expect, it } from 'vitest';
import type { FakeLlm } from '../fakes/llm/server.js';
import type { FakeTelegram } from '../fakes/telegram/server.js';
import { waitFor } from '../helpers/daemon.js';
import { withLlm, withTempDir } from '../helpers/fixtures.js';
import { telegramChannel, telegramEnv, withTelegram } from '../helpers/platforms.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { llmAgent } from '../helpers/toml.js';

const ADA = { id: 42, first_name: 'Ada' };
const BOB = { id: 43, first_name: 'Bob' };
const GROUP = -1001234;

/** The system prompt of the model's request number `i`. */
const systemOf = (llm: FakeLlm, i: number) => String(llm.requests[i]!.body.messages[0]!.content);

/** Waits for a bot message in `chat` containing `text`. */
const replied = (tg: FakeTelegram, chat: number, text: string) => waitFor(() => tg.texts(chat).some((t) => t.includes(text)), 15_000);

describe('memory across sessions, daemon as a real process', () => {
  it('a remembered fact is recalled after /new and a restart, for its owner only (also in a group), never in incognito, and /forget all removes it', async () => {
    const tg = await withTelegram();
    const llm = await withLlm();
    const file = writeProcessConfig(withTempDir('memory'), llmAgent(llm.url, 'm', 'memory = true\nmemory_max_chars = 400\n') + telegramChannel(tg));
    const env = telegramEnv(tg);
    // The model's request for a message: sent, its request recorded, its answer delivered.
    const ask = async (send: () => void, chat: number) => {
      const before = llm.requests.length;
      const answers = tg.texts(chat).length;
      send();
      await waitFor(() => llm.requests.length === before + 1 && tg.texts(chat).length === answers + 1, 15_000);
      return systemOf(llm, before);
    };

    const p1 = withDaemonProcess(file, env);
    await p1.url();
    tg.dm('/remember my favourite colour is teal', ADA);
    await replied(tg, ADA.id, 'Remembered (#');
    tg.dm('/new', ADA);
    await replied(tg, ADA.id, 'Started a new session');
    expect(llm.requests).toHaveLength(0);
    // Stopped and started again: the memory is in the state database, not in the process.
    p1.signal('SIGTERM');
    expect(await p1.exited).toBe(0);
    const p2 = withDaemonProcess(file, env);
    await p2.url();

    expect(await ask(() => tg.dm('which colour should I paint the door?', ADA), ADA.id)).toContain('teal');
    expect(await ask(() => tg.dm('which colour should I paint the door?', BOB), BOB.id)).not.toContain('teal');
    // One group, one session: each speaker's turn carries their own memories only.
    expect(await ask(() => tg.group('which colour should I paint the door?', { from: BOB, mention: true }), GROUP)).not.toContain('teal');
    expect(await ask(() => tg.group('which colour should I paint the door?', { from: ADA, mention: true }), GROUP)).toContain('teal');
    // Nothing in the message matches: the newest memories come instead.
    expect(await ask(() => tg.dm('hello there', ADA), ADA.id)).toContain('teal');

    tg.dm('/mode incognito', ADA);
    await replied(tg, ADA.id, 'Mode incognito is on');
    expect(await ask(() => tg.dm('which colour should I paint the door?', ADA), ADA.id)).not.toContain('teal');
    tg.dm('/remember I live in Lisbon', ADA);
    await replied(tg, ADA.id, 'Incognito mode is on: nothing is remembered');
    tg.dm('/mode incognito', ADA);
    await replied(tg, ADA.id, 'Mode incognito is off');

    tg.dm('/memory', ADA);
    await replied(tg, ADA.id, 'my favourite colour is teal');
    expect(tg.texts(ADA.id).find((t) => t.startsWith('What I remember about you'))).not.toContain('Lisbon');
    tg.dm(`/remember ${'x'.repeat(501)}`, ADA);
    await replied(tg, ADA.id, 'too long to remember');
    tg.dm('/forget 999999', ADA);
    await replied(tg, ADA.id, 'You have no memory #999999');
    tg.dm('/forget all', ADA);
    await replied(tg, ADA.id, 'Forgot all 1 of your memories');
    expect(await ask(() => tg.dm('which colour should I paint the door?', ADA), ADA.id)).not.toContain('teal');

    // The model keeps a fact through the `remember` tool; it is the speaker's.
    llm.script(
      { kind: 'stream', chunks: [{ toolCalls: [{ id: 'c1', name: 'remember', arguments: JSON.stringify({ text: 'Ada lives in Porto' }) }] }] },
      { kind: 'stream', chunks: [{ content: 'Noted.' }] },
    );
    const before = llm.requests.length;
    tg.dm('please remember that I live in Porto', ADA);
    await waitFor(() => llm.requests.length === before + 2, 15_000);
    expect(JSON.stringify(llm.requests[before + 1]!.body.messages)).toContain('Stored as memory #');
    await replied(tg, ADA.id, 'Noted.');
    expect(await ask(() => tg.dm('where do I live?', ADA), ADA.id)).toContain('Ada lives in Porto');
    expect(await ask(() => tg.dm('where do I live?', BOB), BOB.id)).not.toContain('Porto');
  });
});
