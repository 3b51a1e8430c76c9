import { afterAll, describe, expect, it } from 'vitest';
import { partitionOf } from '../../src/cluster/partition-key.js';
import { FakeLlm } from '../fakes/llm/server.js';
import { visibleText } from '../fakes/telegram/server.js';
import { say, withCountingFile } from '../helpers/approval.js';
import { clusterSkipReason } from '../helpers/cluster.js';
import { waitFor } from '../helpers/daemon.js';
import { scaled } from '../helpers/timing.js';
import { llmAgent } from '../helpers/toml.js';
import { ProcessCluster } from './harness.js';

const skip = await clusterSkipReason();

describe.skipIf(skip !== undefined)(`an approval decided while its turn changes instance${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const llm = new FakeLlm();
  afterAll(() => llm.close());

  it(
    'the owner is killed with the question open; the decision is left in PostgreSQL and the new owner applies it without asking again',
    async () => {
      await llm.start();
      const file = withCountingFile();
      const c = new ProcessCluster({ echoDelayMs: 0, agentToml: llmAgent(llm.url) + file.server() });
      try {
        await c.start(2);
        const listener = await waitFor(() => c.ownerOf('listener.tg'), 15_000);
        const owner = c.live().find((m) => m !== listener)!;
        const owned = (await c.status(owner)).cluster.partitions.owned;
        const id = Array.from({ length: 500 }, (_, i) => 8000 + i).find((n) => owned.includes(partitionOf(`tg:${n}`, 16)))!;
        const user = { id, first_name: 'Ada' };
        // The owner's run calls the tool; the new owner's re-run calls it again; then the answer.
        llm.script(file.edit(), file.edit(), say('Edited once.'));
        c.tg.dm('edit the count', user);
        const q = await waitFor(() => c.tg.messages.find((m) => m.chatId === id && m.replyMarkup), 30_000);
        await waitFor(() => owner.proc.lines.some((l) => l.msg === 'tool call waiting for approval'), 20_000);
        owner.proc.child.kill('SIGKILL');
        await owner.proc.exited;

        // Its partitions are still leased to the dead instance: nobody runs the turn now.
        c.tg.click(q, 'Approve', user);
        await waitFor(() => c.tg.texts(id).some((t) => t.startsWith('Noted:')), 20_000);
        await waitFor(() => c.tg.texts(id).includes('Edited once.'), 60_000);
        expect(file.runs).toBe(1);
        // Applied, not asked again: one question, which now shows the outcome.
        expect(c.tg.messages.filter((m) => m.chatId === id && visibleText(m.text, m.parseMode).includes('Approve this tool call'))).toEqual([]);
        expect(c.tg.callsOf('sendMessage').filter((call) => call.body.reply_markup && Number(call.body.chat_id) === id)).toHaveLength(1);
        expect(visibleText(q.text, q.parseMode)).toBe('✅ fs__edit_file: approved.');
        // Logged as the decision is applied, in a child whose log writes are asynchronous: the line may
        // still be on its way through the pipe when the answer it led to has reached the fake.
        await waitFor(() => listener.proc.lines.some((l) => l.msg === 'decision left during a takeover applied'), 10_000);
      } finally {
        await c.close();
      }
    },
    scaled(180_000),
  );
});
