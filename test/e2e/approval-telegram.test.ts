import { beforeEach, describe, expect, it } from 'vitest';
import type { FakeLlm } from '../fakes/llm/server.js';
import { visibleText, type FakeTelegram, type StoredMessage } from '../fakes/telegram/server.js';
import { say, toolResult, withCountingFile, type CountingFile } from '../helpers/approval.js';
import { waitFor } from '../helpers/daemon.js';
import { withChannelDaemon, withLlm } from '../helpers/fixtures.js';
import { firstMcpConnected } from '../helpers/mcp.js';
import { telegramChannel, telegramEnv, withTelegram } from '../helpers/platforms.js';
import { llmAgent } from '../helpers/toml.js';

describe('approval in chat on Telegram (inline keyboard + callback_query), real server-filesystem', () => {
  let tg: FakeTelegram;
  let llm: FakeLlm;
  let file: CountingFile;
  beforeEach(async () => {
    tg = await withTelegram();
    llm = await withLlm();
    file = withCountingFile();
  });

  const start = async (agentExtra = '') => {
    await firstMcpConnected(await withChannelDaemon(llmAgent(llm.url, 'm', agentExtra) + file.server() + telegramChannel(tg), telegramEnv(tg)));
  };
  const question = (chatId: number): Promise<StoredMessage> => waitFor(() => tg.messages.find((m) => m.chatId === chatId && m.replyMarkup), 20_000);
  const shown = (m: StoredMessage) => visibleText(m.text, m.parseMode);

  it("Approve by inline button runs the call once; a different user's click is refused", async () => {
    await start();
    llm.script(file.edit(), say('Edited the file.'));
    tg.group('please edit the count', { mention: true, from: { id: 43, first_name: 'Bob' } });
    const q = await question(-1001234);
    expect(shown(q)).toContain('fs__edit_file {"path":');
    expect(shown(q)).toMatch(/\/approve [0-9a-f]{6}/);
    expect(q.replyMarkup!.inline_keyboard[0]!.map((b) => b.text)).toEqual(['Approve', 'Deny']);

    // Ada did not start the turn: her click is answered and refused; nothing runs.
    tg.click(q, 'Approve', { id: 42, first_name: 'Ada' });
    await waitFor(() => tg.texts(-1001234).includes('Only the person who asked, or an approver, can decide this.'), 10_000);
    expect(file.runs).toBe(0);
    expect(q.replyMarkup).toBeDefined();

    tg.click(q, 'Approve', { id: 43, first_name: 'Bob' });
    await waitFor(() => tg.texts(-1001234).includes('Edited the file.'), 20_000);
    expect(file.runs).toBe(1);
    expect(shown(q)).toBe('✅ fs__edit_file: approved.');
    expect(q.replyMarkup).toBeUndefined();
    // Every callback query was answered.
    await waitFor(() => tg.answeredQueries.length === 2);
    expect(toolResult(llm, 1)).toContain('ran:I');
  });

  it('an approver listed in `approvers` may decide for someone else', async () => {
    await start('approvers = ["42"]');
    llm.script(file.edit(), say('Done.'));
    tg.group('edit it', { mention: true, from: { id: 43, first_name: 'Bob' } });
    const q = await question(-1001234);
    tg.click(q, 'Approve', { id: 42, first_name: 'Ada' });
    await waitFor(() => tg.texts(-1001234).includes('Done.'), 20_000);
    expect(file.runs).toBe(1);
  });

  it('/deny refuses the call: the model is told and nothing runs', async () => {
    await start();
    llm.script(file.edit(), say('Understood, not editing.'));
    tg.dm('edit the count');
    const q = await question(42);
    tg.dm('/deny');
    await waitFor(() => tg.texts(42).includes('Understood, not editing.'), 20_000);
    expect(shown(q)).toBe('❌ fs__edit_file: denied.');
    expect(toolResult(llm, 1)).toContain('the user denied this tool call');
    expect(file.runs).toBe(0);
  });

  it('no answer within approval_timeout_ms counts as deny', async () => {
    await start('approval_timeout_ms = 1500');
    llm.script(file.edit(), say('Nobody approved.'));
    tg.dm('edit the count');
    const q = await question(42);
    await waitFor(() => tg.texts(42).includes('Nobody approved.'), 20_000);
    expect(shown(q)).toBe('⌛ fs__edit_file: no answer within 2 s, so it was denied.');
    expect(toolResult(llm, 1)).toContain('nobody approved this tool call within 2 s');
    expect(file.runs).toBe(0);
    // The buttons are gone; a late /approve with the id finds nothing waiting.
    expect(q.replyMarkup).toBeUndefined();
    const id = /\/approve ([0-9a-f]{6})/.exec(tg.callsOf('sendMessage').find((c) => c.body.reply_markup)!.body.text as string)![1];
    tg.dm(`/approve ${id}`);
    await waitFor(() => tg.texts(42).includes('That approval is no longer waiting.'), 10_000);
    expect(file.runs).toBe(0);
  });

  it('the same call made again in a later step of the turn is asked for again and runs again', async () => {
    await start();
    // Same tool, same arguments, two steps (a real model gives each call its own id).
    llm.script(file.edit('call_1'), file.edit('call_2'), say('Edited twice.'));
    tg.dm('edit the count, then once more');
    const first = await question(42);
    tg.click(first, 'Approve');
    const second = await waitFor(() => tg.messages.find((m) => m.chatId === 42 && m.replyMarkup && m !== first), 20_000);
    expect(shown(second)).toContain('fs__edit_file {"path":');
    tg.click(second, 'Approve');
    await waitFor(() => tg.texts(42).includes('Edited twice.'), 20_000);
    expect(file.runs).toBe(2);
  });
});
