import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { PostboxReply } from '../fixtures/channels/postbox/adapter.js';
import type { Script } from '../fakes/llm/server.js';
import { waitFor } from '../helpers/daemon.js';
import { FIXTURE_ENTRY, midHourClock, TSX_NODE_ARGS } from '../helpers/fixture-entry.js';
import { withLlm } from '../helpers/fixtures.js';
import { DaemonProcess } from '../helpers/process.js';
import { scaled } from '../helpers/timing.js';

/**
 * Quotas in a real daemon process, through the test-only postbox channel: it lets a test
 * name the sender and the chat, so one person can have many conversations at once.
 */
const KEY = 'k-quota-123456';
const auth = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };

async function start(
  config: string,
): Promise<{ url: string; post(chat: string, sender: string, text: string): Promise<void>; replies(chat: string): Promise<PostboxReply[]> }> {
  const dir = mkdtempSync(join(tmpdir(), 'channeld-quotas-'));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'daemon.config.toml');
  writeFileSync(file, `[daemon]\nstate_dir = "${join(dir, 'state')}"\nshutdown_grace_ms = 2000\n\n[http]\nlisten = "127.0.0.1:0"\n\n${config}`);
  // Half past the hour: the hourly window cannot roll over while the test counts on it.
  const clock = midHourClock();
  const p = new DaemonProcess(file, { LB_KEY: KEY, ...clock.env }, [...TSX_NODE_ARGS, ...clock.nodeArgs], FIXTURE_ENTRY);
  onTestFinished(async () => {
    p.signal('SIGTERM');
    await p.exited;
  });
  const url = await p.url(scaled(30_000));
  await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, 30_000);
  return {
    url,
    post: async (chat, sender, text) => {
      const r = await fetch(`${url}/lb/lb/messages`, { method: 'POST', headers: auth, body: JSON.stringify({ chat, sender, text }) });
      expect(r.status).toBe(202);
    },
    replies: async (chat) => ((await (await fetch(`${url}/lb/lb/replies`, { headers: auth })).json()) as PostboxReply[]).filter((r) => r.chatId === chat),
  };
}

/** The postbox channel every test here talks through. */
const CHANNEL = `[[channels]]
id = "lb"
type = "postbox"
allow_from = ["*"]
key_env = "LB_KEY"
path = "/lb"
`;

const finals = (list: PostboxReply[]) => list.filter((r) => r.final);

describe('quotas per person and per channel, in a real daemon process', () => {
  it(
    'user_turns_per_hour = 2: the third message gets one refusal and no model call, the fourth nothing; others and admins are unaffected',
    async () => {
      const llm = await withLlm();
      const d = await start(`[limits]
user_turns_per_hour = 2

[agent]
provider = "openai-compatible"
base_url = "${llm.url}"
model = "m-1"

${CHANNEL}admins = ["boss"]
`);
      const turn = async (chat: string, sender: string, text: string, count: number) => {
        await d.post(chat, sender, text);
        return waitFor(async () => {
          const f = finals(await d.replies(chat));
          return f.length >= count ? f : undefined;
        }, 30_000);
      };
      await turn('c1', 'u1', 'one', 1);
      await turn('c1', 'u1', 'two', 2);
      expect(llm.requests.length).toBe(2);
      const third = await turn('c1', 'u1', 'three', 3);
      expect(third[2]!.text).toMatch(/2 messages per hour .*\(user_turns_per_hour\)\. It resets at \d\d:00 UTC \(in \d+ min\)/);
      expect(llm.requests.length).toBe(2);
      // The fourth is refused without a word: /usage, answered after it in the same conversation, shows it was handled.
      await d.post('c1', 'u1', 'four');
      const usage = await turn('c1', 'u1', '/usage', 4);
      expect(usage[3]!.text).toMatch(/Your user_turns_per_hour: 2 of 2 \(resets \d\d:00 UTC\)/);
      expect((await d.replies('c1')).filter((r) => /user_turns_per_hour\)/.test(r.text))).toHaveLength(1);
      expect(llm.requests.length).toBe(2);

      // Another sender, and an admin past the limit, are answered.
      await turn('c2', 'u2', 'hello', 1);
      for (let i = 1; i <= 3; i++) await turn('c3', 'boss', `admin ${i}`, i);
      expect(llm.requests.length).toBe(6);
      expect(finals(await d.replies('c3')).every((r) => !/user_turns_per_hour/.test(r.text))).toBe(true);

      const metrics = await (await fetch(`${d.url}/metrics`)).text();
      expect(metrics).toContain('channeld_quota_refusals_total{limit="user_turns_per_hour"} 2');
      expect(metrics).not.toMatch(/channeld_quota_refusals_total\{[^}]*u1/);
      const report = (await (await fetch(`${d.url}/actions/usage?since=today`)).json()) as {
        top_quota_users: Array<{ limit: string; channel: string; sender: string | null; used: number }>;
        top_channels: Array<{ channel: string; turns: number }>;
      };
      expect(report.top_quota_users).toEqual([
        { limit: 'user_turns_per_hour', channel: 'lb', sender: 'u1', used: 2 },
        { limit: 'user_turns_per_hour', channel: 'lb', sender: 'u2', used: 1 },
      ]);
      expect(report.top_channels).toEqual([{ channel: 'lb', turns: 6, cost: 0 }]);
    },
    scaled(120_000),
  );

  it(
    '20 turns of one sender at once against user_cost_per_day spend at most one reservation past it',
    async () => {
      const TURNS = 20;
      const LIMIT = 0.0001;
      const PRICE = 0.5;
      const llm = await withLlm();
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      const answer: Script = { kind: 'stream', chunks: [{ content: 'ok', after: released }], usage: { prompt_tokens: 40, completion_tokens: 20 } };
      llm.scriptFor('tiny-1', ...Array.from({ length: TURNS }, () => answer));
      const d = await start(`[agent]
provider = "openai-compatible"
base_url = "${llm.url}"
model = "tiny-1"
system_prompt = "Be brief."
max_output_tokens = 20
user_cost_per_day = ${LIMIT}

[models."tiny-1"]
price_in_per_mtok = ${PRICE}
price_out_per_mtok = ${PRICE}

${CHANNEL}`);
      const chats = Array.from({ length: TURNS }, (_, i) => `c${i}`);
      await Promise.all(chats.map((c, i) => d.post(c, 'u1', `question ${i}`)));
      const refusal = /user_cost_per_day/;
      const all = async () => ((await (await fetch(`${d.url}/lb/lb/replies`, { headers: auth })).json()) as PostboxReply[]).filter((r) => r.final);
      const refused = async () => (await all()).filter((r) => refusal.test(r.text)).length;
      // Each turn either reached the model (and waits there) or was refused.
      await waitFor(async () => llm.requests.length + (await refused()) === TURNS, 30_000);
      release();
      await waitFor(async () => (await all()).length === TURNS, 30_000);

      const usage = (await (await fetch(`${d.url}/actions/usage?since=today`)).json()) as { total: { turns: number; cost: number } };
      const perTurn = (60 * PRICE) / 1e6;
      expect(usage.total.turns).toBe(llm.requests.length);
      expect(usage.total.cost).toBeCloseTo(llm.requests.length * perTurn, 12);
      // Reservations are granted only where they fit, or alone while anything is left: one past at most.
      expect(usage.total.cost).toBeLessThanOrEqual(2 * LIMIT);
      expect(llm.requests.length).toBeGreaterThan(0);
      expect(await refused()).toBe(TURNS - llm.requests.length);
    },
    scaled(120_000),
  );
});
