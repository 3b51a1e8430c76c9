import { describe, expect, it } from 'vitest';
import { OtlpReceiver } from '../fakes/otlp-receiver.js';
import { waitFor } from '../helpers/daemon.js';
import { withChannelDaemon, withLlm, withStarted } from '../helpers/fixtures.js';
import { telegramChannel, telegramEnv, withTelegram } from '../helpers/platforms.js';
import { echoAgent, llmAgent } from '../helpers/toml.js';
import { TRACE_FLUSH_TIMEOUT_MS } from '../../src/daemon/tracing.js';

const ADA = { id: 42, first_name: 'Ada' };
/** Words that appear only in the message, the tool's input and the answer: none may reach the export. */
const QUESTION = 'zebracrossing please keep that I live in Quixotania';
const TOOL_INPUT = 'Ada lives in Quixotania';
const ANSWER = 'Noted, marmalade-skies';

const observe = (url: string, extra = '') => `[observe]\notlp_endpoint = "${url}"\nservice_name = "channeld-test"\n${extra}\n`;

describe('OpenTelemetry traces to an OTLP/HTTP receiver', () => {
  it('a turn with a tool call is one trace: received, stored, queued, the turn, each model call and tool call, the platform requests, the delivery; no message text', async () => {
    const receiver = await withStarted(new OtlpReceiver());
    const tg = await withTelegram();
    const llm = await withLlm();
    llm.script(
      {
        kind: 'stream',
        chunks: [{ toolCalls: [{ id: 'c1', name: 'remember', arguments: JSON.stringify({ text: TOOL_INPUT }) }] }],
        finish: 'tool_calls',
        usage: { prompt_tokens: 31, completion_tokens: 7 },
      },
      { kind: 'stream', chunks: [{ content: ANSWER }], usage: { prompt_tokens: 45, completion_tokens: 5 } },
    );
    // One 429 on the first reply message: its span carries the status and the retry-after.
    tg.fail('sendMessage', { status: 429, retryAfter: 1 });
    const d = await withChannelDaemon(observe(receiver.url) + llmAgent(llm.url, 'm', 'memory = true\n') + telegramChannel(tg), telegramEnv(tg));
    tg.dm(QUESTION, ADA);
    await waitFor(() => tg.texts(ADA.id).includes(ANSWER), 20_000);
    const finished = await waitFor(() => d.logs.entries().find((l) => l.msg === 'turn finished'));
    // Stopping flushes what the batch still holds.
    await d.stop();
    await waitFor(() => receiver.spans.some((s) => s.name === 'deliver'), 10_000);

    const root = receiver.spans.find((s) => s.name === 'receive')!;
    expect(root).toMatchObject({ parentSpanId: '', kind: 5, service: 'channeld-test' });
    expect(root.attributes).toMatchObject({ 'channeld.channel': 'tg', 'channeld.platform': 'telegram', 'channeld.message.taken': true });
    const spans = receiver.trace(root.traceId);
    const one = (name: string) => {
      const found = spans.filter((s) => s.name === name);
      expect(found, name).toHaveLength(1);
      return found[0]!;
    };
    const store = one('store');
    const queued = one('queued');
    const turn = one('turn');
    const tool = one('execute_tool remember');
    const deliver = one('deliver');
    for (const s of [store, queued, turn]) expect(s.parentSpanId, s.name).toBe(root.spanId);
    for (const s of [tool, deliver]) expect(s.parentSpanId, s.name).toBe(turn.spanId);
    expect(turn.attributes).toMatchObject({ 'channeld.turn.outcome': 'done', 'channeld.turn.messages': 1 });
    expect(tool.attributes).toMatchObject({ 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'remember', 'gen_ai.tool.call.id': 'c1' });
    expect(deliver.attributes).toMatchObject({ 'channeld.reply.delivered': true });

    const chats = spans.filter((s) => s.name === 'chat m');
    expect(chats).toHaveLength(2);
    for (const c of chats) {
      expect(c.parentSpanId).toBe(turn.spanId);
      expect(c.kind).toBe(3);
      expect(c.attributes).toMatchObject({ 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'openai-compatible', 'gen_ai.request.model': 'm' });
    }
    expect(chats.map((c) => [c.attributes['gen_ai.usage.input_tokens'], c.attributes['gen_ai.usage.output_tokens']]).sort()).toEqual([
      [31, 7],
      [45, 5],
    ]);

    // Platform requests inside the trace: the refused first send with its 429 and retry-after, then the send that went through.
    const sends = spans.filter((s) => s.attributes['channeld.platform.method'] === 'sendMessage');
    expect(sends.length).toBeGreaterThanOrEqual(2);
    expect(sends.every((s) => s.kind === 3 && [turn.spanId, deliver.spanId].includes(s.parentSpanId))).toBe(true);
    expect(sends.find((s) => s.status === 2)?.attributes).toMatchObject({
      'http.response.status_code': 429,
      'channeld.platform.retry_after_ms': 1000,
      'error.type': 'CHANNEL_RATE_LIMITED',
    });
    expect(sends.some((s) => s.attributes['channeld.platform.outcome'] === 'ok')).toBe(true);
    // The listener's polls are no message's: they are not traced.
    expect(receiver.spans.some((s) => s.attributes['channeld.platform.method'] === 'getUpdates')).toBe(false);

    // The turn's log line carries its trace id.
    expect(finished.trace_id).toBe(root.traceId);
    // No message text, tool input or answer anywhere in what was exported.
    const exported = receiver.bodies.join('\n');
    for (const secret of ['zebracrossing', 'Quixotania', 'marmalade']) expect(exported).not.toContain(secret);
  });

  it('with sample_ratio = 0 nothing is exported, and the turn still runs', async () => {
    const receiver = await withStarted(new OtlpReceiver());
    const tg = await withTelegram();
    const llm = await withLlm();
    const d = await withChannelDaemon(observe(receiver.url, 'sample_ratio = 0') + llmAgent(llm.url, 'm') + telegramChannel(tg), telegramEnv(tg));
    tg.dm('hello there', ADA);
    await waitFor(() => tg.texts(ADA.id).length === 1, 20_000);
    await d.stop();
    expect(receiver.spans).toEqual([]);
  });

  it('a collector that never answers holds shutdown no longer than the flush bound, and says the last spans were lost', async () => {
    const receiver = await withStarted(new OtlpReceiver({ hang: true }));
    const tg = await withTelegram();
    const d = await withChannelDaemon(observe(receiver.url) + echoAgent(0) + telegramChannel(tg), telegramEnv(tg));
    tg.dm('hello there', ADA);
    await waitFor(() => tg.texts(ADA.id).includes('hello there'), 20_000);
    await d.stop();
    expect(receiver.hung).toBeGreaterThanOrEqual(1);
    expect(d.logs.entries().find((l) => l.msg === 'the last spans were not exported within the bound')).toMatchObject({
      level: 40,
      timeout_ms: TRACE_FLUSH_TIMEOUT_MS,
    });
  });
});
