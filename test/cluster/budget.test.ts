import { afterAll, describe, expect, it } from 'vitest';
import { FakeLlm, type Script } from '../fakes/llm/server.js';
import { FakeTelegram } from '../fakes/telegram/server.js';
import { clusterEnv, clusterSkipReason, clusterToml, dropNamespace, uniqueNamespace } from '../helpers/cluster.js';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { scaled } from '../helpers/timing.js';

const skip = await clusterSkipReason();
const BUDGET = 0.0001;
const PRICE_PER_MTOK = 0.5;
const TURNS = 20;
const PARTITIONS = 8;

describe.skipIf(skip !== undefined)(`daily budget across instances${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const ns = uniqueNamespace();
  const llm = new FakeLlm();
  const tg = new FakeTelegram();
  let daemons: TestDaemon[] = [];
  afterAll(async () => {
    await Promise.all(daemons.map((d) => d.stop().catch(() => {})));
    await Promise.all([llm.close(), tg.close()]);
    await dropNamespace(ns);
  });

  it(
    `${TURNS} turns at once on 2 instances against a tiny budget: the reservation in PostgreSQL holds them to it`,
    async () => {
      await Promise.all([llm.start(), tg.start()]);
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      const answer: Script = { kind: 'stream', chunks: [{ content: 'ok', after: released }], usage: { prompt_tokens: 40, completion_tokens: 20 } };
      llm.scriptFor('tiny-1', ...Array.from({ length: TURNS }, () => answer));
      const body = (id: string) =>
        `${clusterToml(ns, `instance_id = "${id}"\nlease_ttl_ms = 1500\npartitions = ${PARTITIONS}`)}` +
        `[agent]\nprovider = "openai-compatible"\nbase_url = "${llm.url}"\nmodel = "tiny-1"\nsystem_prompt = "Be brief."\nmax_output_tokens = 20\ndaily_budget = ${BUDGET}\n\n` +
        `[models."tiny-1"]\nprice_in_per_mtok = ${PRICE_PER_MTOK}\nprice_out_per_mtok = ${PRICE_PER_MTOK}\n\n` +
        `[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG_TOKEN"\napi_root = "${tg.url}"\nallow_from = ["*"]\nnative_drafts = false\nstream_mode = "final"\n`;
      daemons = await Promise.all(['b0', 'b1'].map((id) => startDaemon(body(id), { TG_TOKEN: tg.token, ...clusterEnv })));
      await waitFor(() => {
        const owned = daemons.map((d) => d.daemon.status().cluster!.partitions.owned);
        return owned.flat().length === PARTITIONS && owned.every((o) => o.length >= PARTITIONS / 2);
      }, 30_000);
      const users = Array.from({ length: TURNS }, (_, i) => ({ id: 9000 + i, first_name: `u${i}` }));
      for (const u of users) tg.dm(`question from ${u.id}`, u);
      const refusal = /daily budget/;
      const refused = () => users.filter((u) => tg.texts(u.id).some((t) => refusal.test(t))).length;
      await waitFor(() => llm.requests.length + refused() === TURNS, 30_000);
      release();
      await waitFor(() => users.every((u) => tg.texts(u.id).length === 1), 30_000);

      // Together the instances stayed within the budget plus one reservation.
      const usage = (await (await fetch(`${daemons[0]!.url}/actions/usage?since=today`)).json()) as { total: { turns: number; cost: number } };
      expect(usage.total.turns).toBe(llm.requests.length);
      expect(usage.total.cost).toBeLessThanOrEqual(2 * BUDGET);
      expect(refused()).toBeGreaterThan(0);
      expect(llm.requests.length).toBeGreaterThan(0);
    },
    scaled(120_000),
  );
});
