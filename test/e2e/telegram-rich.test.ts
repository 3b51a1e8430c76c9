import { describe, expect, it } from 'vitest';
import type { FakeTelegram } from '../fakes/telegram/server.js';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChannelDaemon, withLlm } from '../helpers/fixtures.js';
import { telegramChannel, telegramEnv, withTelegram } from '../helpers/platforms.js';
import { echoAgent as echo, llmAgent } from '../helpers/toml.js';

const words = (n: number) => Array.from({ length: n }, (_, i) => `word${i}`).join(' ');

describe('Telegram rich messages', () => {
  let tg: FakeTelegram;
  let d: TestDaemon | undefined;

  const channel = (extra = '') => telegramChannel(tg, extra);
  const start = async (body: string) => {
    d = await withChannelDaemon(body, telegramEnv(tg));
  };

  it('where the server has them, the draft, its edits and the final text are one rich message in Markdown', async () => {
    tg = await withTelegram({ richMessages: true });
    await start(echo(60) + channel());
    const text = words(20);
    tg.dm(text);
    await waitFor(() => tg.texts(42)[0] === text, 10_000);
    expect(tg.messages).toHaveLength(1);
    expect(tg.messages[0]).toMatchObject({ rich: true, parseMode: undefined });
    expect(tg.messages[0]!.edits).toBeGreaterThanOrEqual(1);
    expect(tg.callsOf('sendRichMessage')).toHaveLength(1);
    expect(tg.callsOf('sendMessage')).toHaveLength(0);
    for (const e of tg.callsOf('editMessageText')) expect(e.body).toMatchObject({ rich_message: { markdown: expect.any(String) } });
  });

  it('a 10,000-character answer with a code block is one rich message', async () => {
    tg = await withTelegram({ richMessages: true });
    const llm = await withLlm();
    const code = Array.from({ length: 260 }, (_, i) => `console.log("line ${i} of the example");`).join('\n');
    const answer = `## Script\n\n- one\n- two\n\n\`\`\`js\n${code}\n\`\`\`\n\nThat is all.`;
    expect(answer.length).toBeGreaterThan(10_000);
    llm.script({ kind: 'stream', chunks: answer.match(/[\s\S]{1,800}/g)!.map((content) => ({ content, delayMs: 20 })) });
    await start(llmAgent(llm.url) + channel());
    tg.dm('write me a long script');
    await waitFor(() => tg.texts(42).join('').includes('That is all.'), 15_000);
    expect(tg.messages.filter((m) => !m.deleted)).toHaveLength(1);
    expect(tg.messages[0]).toMatchObject({ rich: true, text: answer });
  });

  it('an older server refuses them: the reply goes the HTML way, and the refusal is remembered', async () => {
    tg = await withTelegram();
    await start(echo(20) + channel());
    tg.dm('first question here');
    await waitFor(() => tg.texts(42)[0] === 'first question here', 10_000);
    tg.dm('second question here');
    await waitFor(() => tg.texts(42)[1] === 'second question here', 10_000);
    expect(tg.callsOf('sendRichMessage')).toHaveLength(1);
    expect(tg.callsOf('sendMessage')).toHaveLength(2);
    expect(tg.messages.every((m) => m.parseMode === 'HTML' && !m.rich)).toBe(true);
    expect(d!.logs.text).toContain('refused rich messages');
  });

  it('on an older server a long answer is split as today, fences balanced', async () => {
    tg = await withTelegram();
    const llm = await withLlm();
    const code = Array.from({ length: 260 }, (_, i) => `console.log("line ${i} of the example");`).join('\n');
    const answer = `Here.\n\n\`\`\`js\n${code}\n\`\`\`\n\nThat is all.`;
    // The whole answer at once: the first rich attempt is already too long for a text message.
    llm.script({ kind: 'stream', chunks: [{ content: answer }] });
    await start(llmAgent(llm.url) + channel('stream_mode = "final"\n'));
    tg.dm('write me a long script');
    await waitFor(() => tg.texts(42).join('').includes('That is all.'), 15_000);
    const parts = tg.messages.filter((m) => !m.deleted);
    expect(parts.length).toBe(3);
    for (const p of parts) expect(p.text.split('<pre>').length).toBe(p.text.split('</pre>').length);
    expect(tg.callsOf('sendRichMessage')).toHaveLength(1);
  });

  it('rich_messages = false keeps to HTML without asking', async () => {
    tg = await withTelegram({ richMessages: true });
    await start(echo(0) + channel('rich_messages = false\n'));
    tg.dm('plain please');
    await waitFor(() => tg.texts(42)[0] === 'plain please', 10_000);
    expect(tg.callsOf('sendRichMessage')).toHaveLength(0);
    expect(tg.messages[0]).toMatchObject({ parseMode: 'HTML' });
  });

  it('native drafts go as rich drafts and end in one rich message', async () => {
    tg = await withTelegram({ richMessages: true });
    await start(echo(80) + channel().replace('native_drafts = false', 'native_drafts = true'));
    const text = words(12);
    tg.dm(text);
    await waitFor(() => tg.texts(42)[0] === text, 10_000);
    expect(tg.drafts.length).toBeGreaterThanOrEqual(1);
    expect(tg.drafts.every((x) => x.rich)).toBe(true);
    expect(tg.callsOf('sendMessageDraft')).toHaveLength(0);
    expect(tg.messages[0]).toMatchObject({ rich: true });
  });
});
