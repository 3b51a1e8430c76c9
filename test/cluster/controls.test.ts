import { afterAll, afterEach, describe, expect, it, onTestFailed } from 'vitest';
import { partitionOf } from '../../src/cluster/partition-key.js';
import { FakeLlm } from '../fakes/llm/server.js';
import { FakeTelegram, visibleText, type StoredMessage } from '../fakes/telegram/server.js';
import { callTool, say, toolResult, withCountingFile, type CountingFile } from '../helpers/approval.js';
import { clusterEnv, clusterSkipReason, clusterToml, dropNamespace, uniqueNamespace } from '../helpers/cluster.js';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { scaled } from '../helpers/timing.js';
import { EVERYTHING_BIN, stdioServer } from '../helpers/mcp.js';
import { llmAgent } from '../helpers/toml.js';

const skip = await clusterSkipReason();
const PARTITIONS = 8;

describe.skipIf(skip !== undefined)(`approvals and /stop tool reach the instance that runs the turn${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const namespaces: string[] = [];
  // One per test: a failed test's unused scripts must not answer the next test's turns.
  let llm = new FakeLlm();
  let tg: FakeTelegram | undefined;
  let file: CountingFile | undefined;
  let daemons: TestDaemon[] = [];
  afterEach(async () => {
    await Promise.all(daemons.map((d) => d.stop().catch(() => {})));
    daemons = [];
    await tg?.close();
    tg = undefined;
    await llm.close();
  });
  afterAll(async () => {
    for (const ns of namespaces) await dropNamespace(ns);
  });

  /** `n` instances sharing the partitions; the one that polls Telegram, and the others. */
  const cluster = async (n: number) => {
    llm = new FakeLlm();
    await llm.start();
    // What each instance logged and what the fakes saw, to tell where a turn stopped.
    onTestFailed(() => {
      console.log(JSON.stringify({ llmRequests: llm.requests.length, telegram: tg?.messages.map((m) => [m.chatId, m.text.slice(0, 60)]) }));
      for (const [i, d] of daemons.entries()) for (const e of d.logs.entries()) console.log(`i${i}`, JSON.stringify(e));
    });
    const ns = uniqueNamespace();
    namespaces.push(ns);
    tg = new FakeTelegram();
    await tg.start();
    file = withCountingFile();
    const body = (id: string) =>
      `${clusterToml(ns, `instance_id = "${id}"\nlease_ttl_ms = 1500\npartitions = ${PARTITIONS}`)}${llmAgent(llm.url)}` +
      file!.server() +
      stdioServer('everything', EVERYTHING_BIN, ['stdio']) +
      `[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG_TOKEN"\napi_root = "${tg!.url}"\nallow_from = ["*"]\nnative_drafts = false\n`;
    daemons = await Promise.all(Array.from({ length: n }, (_, i) => startDaemon(body(`i${i}`), { TG_TOKEN: tg!.token, ...clusterEnv })));
    await waitFor(() => {
      const owned = daemons.map((d) => d.daemon.status().cluster!.partitions.owned);
      return owned.flat().length === PARTITIONS && owned.every((o) => o.length >= Math.floor(PARTITIONS / n));
    }, 30_000);
    await waitFor(() => daemons.every((d) => d.daemon.mcp.status().every((m) => m.state === 'connected')), 30_000, 50);
    const listener = await waitFor(() => daemons.find((d) => d.daemon.status().channels[0]!.state === 'connected'), 15_000);
    return { listener, others: daemons.filter((d) => d !== listener) };
  };

  /** A Telegram user whose conversation runs on `d` (its partition is `d`'s), not yet used. */
  const used = new Set<number>();
  const userOn = (d: TestDaemon) => {
    const owned = d.daemon.status().cluster!.partitions.owned;
    const id = Array.from({ length: 500 }, (_, i) => 7000 + i).find((n) => !used.has(n) && owned.includes(partitionOf(`tg:${n}`, PARTITIONS)))!;
    used.add(id);
    return { id, first_name: `u${id}` };
  };
  const question = (chatId: number, not?: StoredMessage) => waitFor(() => tg!.messages.find((m) => m.chatId === chatId && m.replyMarkup && m !== not), 20_000);
  const shown = (m: StoredMessage) => visibleText(m.text, m.parseMode);
  const controlled = (d: TestDaemon) => (d.logs.text.match(/control from another instance/g) ?? []).length;

  for (const n of [2, 3]) {
    it(
      `${n} instances: the approve button, /deny and /stop tool act on a turn running on an instance that does not poll Telegram`,
      async () => {
        const { listener, others } = await cluster(n);

        // Approve by button: the click arrives at the listener, the call runs where the turn runs.
        const ada = userOn(others[0]!);
        llm.script(file!.edit(), say('Edited the file.'));
        tg!.dm('please edit the count', ada);
        const q = await question(ada.id);
        // Someone else's click is refused by the owner's check, as on one node.
        tg!.click(q, 'Approve', { id: 99, first_name: 'Eve' });
        await waitFor(() => tg!.texts(99).length + tg!.texts(ada.id).filter((t) => t.startsWith('Only the person')).length > 0, 10_000);
        expect(file!.runs).toBe(0);
        tg!.click(q, 'Approve', ada);
        await waitFor(() => tg!.texts(ada.id).includes('Edited the file.'), 20_000);
        expect(file!.runs).toBe(1);
        expect(shown(q)).toBe('✅ fs__edit_file: approved.');
        expect(controlled(others[0]!)).toBeGreaterThanOrEqual(2);

        // /deny typed, for a turn on the last instance.
        const bob = userOn(others.at(-1)!);
        llm.script(file!.edit(), say('Understood, not editing.'));
        tg!.dm('edit the count again', bob);
        const q2 = await question(bob.id);
        tg!.dm('/deny', bob);
        await waitFor(() => tg!.texts(bob.id).includes('Understood, not editing.'), 20_000);
        expect(shown(q2)).toBe('❌ fs__edit_file: denied.');
        expect(toolResult(llm, llm.requests.length - 1)).toContain('the user denied this tool call');
        expect(file!.runs).toBe(1);

        // /stop tool cancels the running call there; the answer goes on.
        const cy = userOn(others[0]!);
        llm.script(callTool('everything__trigger-long-running-operation', { duration: 60, steps: 60 }), say('Went on without it.'));
        tg!.dm('run the long thing', cy);
        await waitFor(() => tg!.texts(cy.id).some((t) => t.includes('1/60')), 20_000).catch((e) => {
          throw new Error(JSON.stringify(tg!.texts(cy.id)) + String(e));
        });
        tg!.dm('/stop tool', cy);
        await waitFor(() => tg!.texts(cy.id).includes('Cancelled the running tool call; the answer goes on.'), 10_000);
        await waitFor(() => tg!.texts(cy.id).includes('Went on without it.'), 20_000);
        expect(toolResult(llm, llm.requests.length - 1)).toContain('cancelled by the user');
        // Nothing of this ran on the listener.
        expect(listener.logs.text).not.toContain('tool call waiting for approval');
      },
      scaled(120_000),
    );
  }
});
