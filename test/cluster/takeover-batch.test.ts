import { afterAll, describe, expect, it } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import { partitionOf } from '../../src/cluster/partition-key.js';
import { FakeTelegram } from '../fakes/telegram/server.js';
import { startDaemon, waitFor } from '../helpers/daemon.js';
import { withLlm } from '../helpers/fixtures.js';
import { llmAgent } from '../helpers/toml.js';
import { clusterEnv, clusterSkipReason, clusterToml, dropNamespace, uniqueNamespace, withNats } from '../helpers/cluster.js';

const skip = await clusterSkipReason();

// A takeover hands a partition's unanswered items in one at a time. The items of a collected
// turn that broke off share one reply: started one by one as they came, each asked the model
// alone and each answer overwrote the other's in that reply.

describe.skipIf(skip !== undefined)(`a takeover's backlog${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const ns = uniqueNamespace();
  afterAll(() => dropNamespace(ns));

  it('a collected turn cut by a hand-back starts again as one turn: one answer to both messages in its reply', async () => {
    const tg = new FakeTelegram();
    await tg.start();
    const llm = await withLlm();
    let releaseFirst!: () => void;
    const firstHeld = new Promise<void>((r) => (releaseFirst = r));
    llm.script(
      // The first answer is held until the two later messages wait in its lane.
      { kind: 'stream', chunks: [{ content: 'one ' }, { content: 'two three four five six seven eight nine ten', after: firstHeld }] },
      // The collected turn shows its start, then runs until the hand-back cuts it.
      { kind: 'stream', chunks: [{ content: 'w0 ' }, { content: 'w1', after: new Promise(() => {}) }] },
    );
    // Then the fake echoes the last user message: the batch run again as one turn, the sentinel.
    const body =
      `${clusterToml(ns, 'instance_id = "solo"\nlease_ttl_ms = 1500\npartitions = 4')}${llmAgent(llm.url)}` +
      `[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG_TOKEN"\napi_root = "${tg.url}"\nallow_from = ["*"]\nnative_drafts = false\nqueue_mode = "collect"\n`;
    const d = await startDaemon(body, { TG_TOKEN: tg.token, ...clusterEnv }, 'shutdown_grace_ms = 300');
    try {
      await waitFor(() => d.daemon.status().cluster!.partitions.owned.length === 4 && d.daemon.status().channels[0]!.state === 'connected', 20_000);
      const ada = { id: 42, first_name: 'Ada' };
      const words = Array.from({ length: 60 }, (_, i) => `w${i}`).join(' ');
      // The first runs alone; the two sent while it runs are collected into the next turn.
      tg.dm('one two three four five six seven eight nine ten', ada);
      await waitFor(() => d.daemon.status().turns.list.some((t) => t.state === 'running'), 10_000);
      tg.dm(words, ada);
      tg.dm('and the last', ada);
      await waitFor(() => d.daemon.status().turns.list.filter((t) => t.state === 'queued').length === 2, 10_000);
      releaseFirst();
      await waitFor(() => tg.texts(42).length === 2 && tg.texts(42)[1]!.startsWith('w0'), 20_000);
      const before = d.logs.entries().filter((e) => e.msg === 'partition acquired').length;
      // Its partition's consumer is deleted: the hand-back cuts the turn after the grace, and the
      // partition is taken again at once, its two items handed in from the stream.
      const partition = partitionOf('tg:42', 4);
      await withNats(async (nc) => expect(await (await jetstreamManager(nc)).consumers.delete(`${ns}_inbox`, `p${partition}`)).toBe(true));
      await waitFor(() => d.logs.entries().filter((e) => e.msg === 'partition acquired').length > before, 20_000);
      tg.dm('sentinel', ada);
      await waitFor(() => tg.texts(42).includes('sentinel'), 30_000);
      // Before: each ran alone in the shared reply, which ended with the last one's answer alone.
      expect(tg.texts(42)).toEqual(['one two three four five six seven eight nine ten', `${words}\n\nand the last`, 'sentinel']);
    } finally {
      await d.stop();
      await tg.close();
    }
  });
});
