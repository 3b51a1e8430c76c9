import { afterAll, describe, expect, it } from 'vitest';
import { FakeLlm } from '../fakes/llm/server.js';
import { FakeTelegram } from '../fakes/telegram/server.js';
import { clusterEnv, clusterSkipReason, clusterToml, dropNamespace, uniqueNamespace } from '../helpers/cluster.js';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { scaled } from '../helpers/timing.js';

const skip = await clusterSkipReason();
const ADA = { id: 42, first_name: 'Ada' };
const BOB = { id: 43, first_name: 'Bob' };

describe.skipIf(skip !== undefined)(`memory across instances${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const ns = uniqueNamespace();
  const llm = new FakeLlm();
  const tg = new FakeTelegram();
  const daemons: TestDaemon[] = [];
  afterAll(async () => {
    await Promise.all(daemons.map((d) => d.stop().catch(() => {})));
    await Promise.all([llm.close(), tg.close()]);
    await dropNamespace(ns);
  });

  it(
    'a memory kept through one instance is recalled by another (PostgreSQL), for its owner only, and /forget all there removes it',
    async () => {
      await Promise.all([llm.start(), tg.start()]);
      // Each instance has its own state_dir: only PostgreSQL is shared.
      const body = (id: string) =>
        `${clusterToml(ns, `instance_id = "${id}"\nlease_ttl_ms = 1500\npartitions = 2`)}` +
        `[agent]\nprovider = "openai-compatible"\nbase_url = "${llm.url}"\nmodel = "m"\nmemory = true\n\n` +
        `[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG_TOKEN"\napi_root = "${tg.url}"\nallow_from = ["*"]\nnative_drafts = false\nstream_mode = "final"\n`;
      const replied = (chat: number, text: string) => waitFor(() => tg.texts(chat).some((t) => t.includes(text)), 30_000);
      const ask = async (from: typeof ADA) => {
        const before = llm.requests.length;
        tg.dm('which colour should I paint the door?', from);
        await waitFor(() => llm.requests.length === before + 1, 30_000);
        return String(llm.requests[before]!.body.messages[0]!.content);
      };

      const first = await startDaemon(body('m0'), { TG_TOKEN: tg.token, ...clusterEnv });
      daemons.push(first);
      tg.dm('/remember my favourite colour is teal', ADA);
      await replied(ADA.id, 'Remembered (#');
      await first.stop();

      const second = await startDaemon(body('m1'), { TG_TOKEN: tg.token, ...clusterEnv });
      daemons.push(second);
      expect(await ask(ADA)).toContain('teal');
      expect(await ask(BOB)).not.toContain('teal');
      tg.dm('/forget all', ADA);
      await replied(ADA.id, 'Forgot all 1 of your memories');
      expect(await ask(ADA)).not.toContain('teal');
    },
    scaled(120_000),
  );
});
