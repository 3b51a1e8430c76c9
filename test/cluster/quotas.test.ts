import { afterAll, describe, expect, it } from 'vitest';
import { partitionOf } from '../../src/cluster/partition-key.js';
import { FakeLlm, type Script } from '../fakes/llm/server.js';
import { FakeTelegram } from '../fakes/telegram/server.js';
import { clusterEnv, clusterSkipReason, clusterToml, dropNamespace, uniqueNamespace } from '../helpers/cluster.js';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { scaled } from '../helpers/timing.js';

const skip = await clusterSkipReason();
const PARTITIONS = 8;
const SENDER = { id: 7001, first_name: 'Ada' };
const OTHER = { id: 7002, first_name: 'Bob' };

describe.skipIf(skip !== undefined)(`per-sender quotas across instances${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c();
  });

  /** Two instances with `user_turns_per_hour = 2`, and `count` group chats alternating between them (q0, q1, q0, …). */
  async function twoInstances(count: number, script?: Script) {
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
    const body = (id: string) =>
      `${clusterToml(ns, `instance_id = "${id}"\nlease_ttl_ms = 1500\npartitions = ${PARTITIONS}`)}` +
      `[limits]\nuser_turns_per_hour = 2\n\n[agent]\nprovider = "openai-compatible"\nbase_url = "${llm.url}"\nmodel = "m"\n\n` +
      `[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG_TOKEN"\napi_root = "${tg.url}"\nallow_from = ["*"]\nnative_drafts = false\nstream_mode = "final"\n`;
    daemons = await Promise.all(['q0', 'q1'].map((id) => startDaemon(body(id), { TG_TOKEN: tg.token, ...clusterEnv })));
    const owned = await waitFor(() => {
      const o = daemons.map((d) => d.daemon.status().cluster!.partitions.owned);
      return o.flat().length === PARTITIONS && o.every((p) => p.length > 0) ? o : undefined;
    }, 30_000);
    if (script) llm.scriptFor('m', ...Array.from({ length: 8 }, () => script));
    // Group chats whose conversations run on q0, q1, q0, …: one sender's messages alternate instances.
    const chats: number[] = [];
    for (let n = 0; n < count; n++) {
      for (let chat = -1001000 - chats.length; ; chat--)
        if (!chats.includes(chat) && owned[n % 2]!.includes(partitionOf(`tg:${chat}`, PARTITIONS))) {
          chats.push(chat);
          break;
        }
    }
    return { llm, tg, daemons, chats };
  }

  it(
    'user_turns_per_hour = 2 with one sender in group chats run by two instances: the third gets the one refusal, the model sees 2 requests; the charts show both instances',
    async () => {
      const { llm, tg, daemons, chats } = await twoInstances(4);
      const finals = (chat: number) => tg.texts(chat);
      const say = async (n: number, text: string, from = SENDER, count = 1) => {
        tg.group(text, { chatId: chats[n]!, from, mention: true });
        return waitFor(() => (finals(chats[n]!).length >= count ? finals(chats[n]!) : undefined), 30_000);
      };

      await say(0, 'one');
      await say(1, 'two');
      expect(llm.requests.length).toBe(2);
      const third = await say(2, 'three');
      expect(third.at(-1)).toMatch(/2 messages per hour .*\(user_turns_per_hour\)\. It resets at \d\d:00 UTC/);
      expect(llm.requests.length).toBe(2);
      // The fourth, on the other instance, is refused without a word: the refusal is told once per window
      // across the cluster. Another sender in the same chat is answered after it (the chat's turns run in order).
      tg.group('four', { chatId: chats[3]!, from: SENDER, mention: true });
      const after = await say(3, 'hello', OTHER);
      expect(after).toHaveLength(1);
      expect(after[0]).not.toMatch(/user_turns_per_hour/);
      expect(llm.requests.length).toBe(3);
      // Both instances read the one counter.
      for (const d of daemons) {
        const r = (await (await fetch(`${d.url}/actions/usage?since=today`)).json()) as { top_quota_users: Array<{ sender: string | null; used: number }> };
        expect(r.top_quota_users.find((u) => u.sender === String(SENDER.id))?.used).toBe(2);
      }
      // The charts add up every instance's minutes: each stores its own as it answers, so the second read has both.
      const charts = async (d: TestDaemon) =>
        (await (await fetch(`${d.url}/actions/charts?minutes=60`)).json()) as { messages: number[]; turns: number[]; refusals: Record<string, number[]> };
      // A turn's minute is counted one platform answer after its reply shows, so read until the last one is in.
      const sum = (a: number[] = []) => a.reduce((x, y) => x + y, 0);
      let both!: Awaited<ReturnType<typeof charts>>;
      await waitFor(
        async () => {
          await charts(daemons[0]!);
          both = await charts(daemons[1]!);
          return sum(both.turns) >= 5;
        },
        10_000,
        50,
      ).catch(() => {});
      expect(sum(both.messages)).toBe(5);
      expect(sum(both.turns)).toBe(5);
      expect(sum(both.refusals.user_turns_per_hour)).toBe(2);
    },
    scaled(120_000),
  );

  it(
    'user_turns_per_hour = 2 and four messages of one sender at once on two instances: the model sees exactly 2 requests',
    async () => {
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      const { llm, tg, chats } = await twoInstances(4, { kind: 'stream', chunks: [{ content: 'ok', after: released }] });
      for (const chat of chats) tg.group('at once', { chatId: chat, from: SENDER, mention: true });
      const refused = () => chats.filter((c) => tg.texts(c).some((t) => /user_turns_per_hour/.test(t))).length;
      // Each turn reached the model (and waits there), was told the refusal, or was refused silently (told once).
      await waitFor(() => llm.requests.length === 2 && refused() === 1, 30_000).catch((err: unknown) => {
        // Say which half did not come (an overrun, a second refusal, or a message not yet taken).
        throw new Error(
          `${String(err)}: ${llm.requests.length} model requests, ${refused()} refusals, replies ${JSON.stringify(chats.map((c) => tg.texts(c)))}`,
        );
      });
      release();
      await waitFor(() => chats.filter((c) => tg.texts(c).length > 0).length === 3, 30_000);
      expect(llm.requests.length).toBe(2);
      expect(refused()).toBe(1);
    },
    scaled(120_000),
  );
});
