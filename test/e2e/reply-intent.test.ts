import { beforeEach, describe, expect, it } from 'vitest';
import { INTENT_MIN_GAP_MS } from '../../src/dispatch/access.js';
import type { FakeLlm } from '../fakes/llm/server.js';
import type { FakeTelegram } from '../fakes/telegram/server.js';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChannelDaemon, withLlm } from '../helpers/fixtures.js';
import { telegramChannel, telegramEnv, withTelegram } from '../helpers/platforms.js';
import { llmAgent } from '../helpers/toml.js';

/** reply_intent = "classifier": the fake LLM's intent model decides reply or ignore. */
describe('reply intent classifier in groups', () => {
  let tg: FakeTelegram;
  let llm: FakeLlm;
  let d: TestDaemon | undefined;
  beforeEach(async () => {
    tg = await withTelegram();
    llm = await withLlm();
  });

  const start = async (intent = 'reply_intent = "classifier"\nintent_model = "tiny"\n') => {
    d = await withChannelDaemon(llmAgent(llm.url, 'big') + telegramChannel(tg, `rich_messages = false\n${intent}`), telegramEnv(tg));
  };
  const decisions = async () => Object.fromEntries((await d!.daemon.metrics.intentCalls.get()).values.map((v) => [v.labels.decision, v.value]));
  const word = (text: string) => ({ kind: 'stream' as const, chunks: [{ content: text }] });

  it('"ignore" keeps the message as context; "reply" starts a turn that sees it; the intent call is measured', async () => {
    await start();
    llm.scriptFor('tiny', word('ignore'));
    tg.group('did anyone see the game last night');
    await waitFor(async () => (await decisions()).ignore === 1, 10_000);
    const firstJudged = Date.now();
    const intentRequests = () => llm.requests.filter((r) => r.body.model === 'tiny');
    expect(intentRequests()).toHaveLength(1);
    expect(JSON.stringify(intentRequests()[0]!.body.messages)).toContain('did anyone see the game last night');

    // Rate-limited per group: a second message right away is not judged.
    tg.group('no, I was out');
    await waitFor(async () => (await decisions()).rate_limited === 1, 10_000);
    expect(intentRequests()).toHaveLength(1);

    await waitFor(() => Date.now() - firstJudged > INTENT_MIN_GAP_MS, INTENT_MIN_GAP_MS + 5000, 50);
    llm.scriptFor('tiny', word('reply'));
    tg.group('hey, can you explain the offside rule?');
    await waitFor(() => tg.texts(-1001234).length === 1, 10_000);
    const turn = llm.requests.find((r) => r.body.model === 'big')!;
    const seen = JSON.stringify(turn.body.messages);
    expect(seen).toContain('can you explain the offside rule');
    // The earlier unaddressed messages came along as context.
    expect(seen).toContain('did anyone see the game last night');
    expect(await decisions()).toMatchObject({ ignore: 1, reply: 1, rate_limited: 1 });
    expect((await d!.daemon.metrics.intentLatency.get()).values.find((v) => v.metricName?.endsWith('_count'))!.value).toBe(2);
    expect((await d!.daemon.metrics.intentTokens.get()).values.find((v) => v.labels.kind === 'input')!.value).toBeGreaterThan(0);
  });

  it('a classifier failure means ignore, and says so in the log', async () => {
    await start();
    llm.scriptFor('tiny', { kind: 'status', status: 500 });
    tg.group('is the bot even here');
    await waitFor(async () => (await decisions()).failed === 1, 10_000);
    await waitFor(() => d!.logs.text.includes('the intent classifier failed'), 5000);
    expect(llm.requests.filter((r) => r.body.model === 'big')).toHaveLength(0);
    expect(tg.messages).toHaveLength(0);
  });

  it('with the default reply_intent = "mention" no intent call is made', async () => {
    await start('');
    tg.group('just chatting');
    tg.group('hello bot', { mention: true });
    await waitFor(() => tg.texts(-1001234).length === 1, 10_000);
    expect(llm.requests.every((r) => r.body.model === 'big')).toBe(true);
    expect(llm.requests).toHaveLength(1);
  });
});
