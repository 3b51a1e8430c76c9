import { afterAll, describe, expect, it, onTestFailed } from 'vitest';
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

/** What the usage action answers (the parts these tests read). */
interface UsageReport {
  total: { turns: number; cost: number };
  top_quota_users: Array<{ limit: string; channel: string; sender: string | null; used: number }>;
}

describe.skipIf(skip !== undefined)(`spending limits across instances${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
  });

  /**
   * 20 DMs from 20 senders at once on 2 instances, every answer held until all turns reached
   * the model or were refused: `agentKey` goes in the agent's table, `channelKey` in the channel's.
   */
  async function concurrentTurns(keys: { agentKey?: string; channelKey?: string }, refusal: RegExp): Promise<{ daemons: TestDaemon[]; usage: UsageReport }> {
    const ns = uniqueNamespace();
    const llm = new FakeLlm();
    const tg = new FakeTelegram();
    let daemons: TestDaemon[] = [];
    cleanups.push(async () => {
      await Promise.all(daemons.map((d) => d.stop().catch(() => {})));
      await Promise.all([llm.close(), tg.close()]);
      await dropNamespace(ns);
    });
    await Promise.all([llm.start(), tg.start()]);
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const answer: Script = { kind: 'stream', chunks: [{ content: 'ok', after: released }], usage: { prompt_tokens: 40, completion_tokens: 20 } };
    llm.scriptFor('tiny-1', ...Array.from({ length: TURNS }, () => answer));
    const body = (id: string) =>
      `${clusterToml(ns, `instance_id = "${id}"\nlease_ttl_ms = 1500\npartitions = ${PARTITIONS}`)}` +
      `[agent]\nprovider = "openai-compatible"\nbase_url = "${llm.url}"\nmodel = "tiny-1"\nsystem_prompt = "Be brief."\nmax_output_tokens = 20\n${keys.agentKey ?? ''}\n\n` +
      `[models."tiny-1"]\nprice_in_per_mtok = ${PRICE_PER_MTOK}\nprice_out_per_mtok = ${PRICE_PER_MTOK}\n\n` +
      `[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG_TOKEN"\napi_root = "${tg.url}"\nallow_from = ["*"]\nnative_drafts = false\nstream_mode = "final"\n${keys.channelKey ?? ''}\n`;
    daemons = await Promise.all(['b0', 'b1'].map((id) => startDaemon(body(id), { TG_TOKEN: tg.token, ...clusterEnv })));
    // What each sender got and what each instance logged, to tell a lost answer from a doubled one or a stalled partition.
    onTestFailed(() => {
      console.log(JSON.stringify({ llmRequests: llm.requests.length, texts: tg.messages.map((m) => [m.chatId, m.text.slice(0, 80)]) }));
      for (const [i, d] of daemons.entries()) for (const e of d.logs.entries()) if (Number(e.level) >= 30) console.log(`b${i}`, JSON.stringify(e));
    });
    await waitFor(() => {
      const owned = daemons.map((d) => d.daemon.status().cluster!.partitions.owned);
      return owned.flat().length === PARTITIONS && owned.every((o) => o.length >= PARTITIONS / 2);
    }, 30_000);
    const users = Array.from({ length: TURNS }, (_, i) => ({ id: 9000 + i, first_name: `u${i}` }));
    for (const u of users) tg.dm(`question from ${u.id}`, u);
    const refused = () => users.filter((u) => tg.texts(u.id).some((t) => refusal.test(t))).length;
    await waitFor(() => llm.requests.length + refused() === TURNS, 30_000);
    release();
    await waitFor(() => users.every((u) => tg.texts(u.id).length === 1), 30_000);

    // A turn's usage is stored after its answer went out, behind each instance's write queue,
    // so the other instance's last records reach PostgreSQL a moment after its replies show.
    let usage!: UsageReport;
    await waitFor(
      async () => {
        usage = (await (await fetch(`${daemons[0]!.url}/actions/usage?since=today`)).json()) as UsageReport;
        return usage.total.turns >= llm.requests.length;
      },
      10_000,
      50,
    ).catch(() => {});
    // Together the instances stayed within the limit plus one reservation.
    expect(usage.total.turns).toBe(llm.requests.length);
    expect(usage.total.cost).toBeLessThanOrEqual(2 * BUDGET);
    expect(refused()).toBeGreaterThan(0);
    expect(llm.requests.length).toBeGreaterThan(0);
    return { daemons, usage };
  }

  it(
    `${TURNS} turns at once on 2 instances against a tiny budget: the reservation in PostgreSQL holds them to it`,
    () => concurrentTurns({ agentKey: `daily_budget = ${BUDGET}` }, /daily budget/),
    scaled(120_000),
  );

  it(
    `${TURNS} senders at once on 2 instances against channel_cost_per_day: one counter in PostgreSQL holds them to it`,
    async () => {
      const { daemons, usage } = await concurrentTurns({ channelKey: `channel_cost_per_day = ${BUDGET}` }, /channel_cost_per_day/);
      // Either instance reads the one shared counter, settled (as the ledger's record) after the answer went out.
      for (const d of daemons) {
        let r!: UsageReport;
        await waitFor(
          async () => {
            r = (await (await fetch(`${d.url}/actions/usage?since=today`)).json()) as UsageReport;
            return Math.abs((r.top_quota_users[0]?.used ?? 0) - usage.total.cost) < 1e-12;
          },
          10_000,
          50,
        ).catch(() => {});
        expect(r.top_quota_users).toEqual([{ limit: 'channel_cost_per_day', channel: 'tg', sender: null, used: expect.closeTo(usage.total.cost, 12) }]);
      }
    },
    scaled(120_000),
  );
});
