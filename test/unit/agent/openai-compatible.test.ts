import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { AgentEvent } from '../../../src/contracts/agent-events.js';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import { OpenAICompatibleRunner, type OpenAICompatibleOptions } from '../../../src/agent/openai-compatible.js';
import { TurnReducer } from '../../../src/agent/reducer.js';
import { FailoverRunner, ModelCooldowns } from '../../../src/agent/failover.js';
import { RepetitionGuard, RepetitionGuardedRunner } from '../../../src/agent/repetition.js';
import type { AgentRunner } from '../../../src/contracts/agent-runner.js';
import type { AgentInput } from '../../../src/contracts/agent-runner.js';
import type { Tool } from '../../../src/contracts/tools.js';
import { FakeLlm } from '../../fakes/llm/server.js';
import { waitFor } from '../../helpers/daemon.js';
import { scaled } from '../../helpers/timing.js';

let llm: FakeLlm;
beforeAll(async () => {
  llm = new FakeLlm();
  await llm.start();
});
afterAll(() => llm.close());

function runner(over: Partial<OpenAICompatibleOptions> = {}) {
  return new OpenAICompatibleRunner({
    baseUrl: llm.url,
    model: 'fake-model',
    maxOutputTokens: 256,
    requestTimeoutMs: 5000,
    maxSteps: 4,
    timeZone: 'UTC',
    retryBaseMs: 10,
    ...over,
  });
}

const input = (text: string, over: Partial<AgentInput> = {}): AgentInput => ({ system: 'Be brief.', history: [], text, ...over });

async function collect(r: AgentRunner, i: AgentInput, signal = new AbortController().signal): Promise<AgentEvent[]> {
  const out: AgentEvent[] = [];
  for await (const e of r.run(i, { scope: 's', channelId: 'c', signal }, signal)) out.push(e);
  return out;
}

const text = (events: AgentEvent[]) => events.flatMap((e) => (e.type === 'text_delta' ? [e.text] : [])).join('');
const reasoning = (events: AgentEvent[]) => events.flatMap((e) => (e.type === 'reasoning_delta' ? [e.text] : [])).join('');

describe('OpenAICompatibleRunner against the fake LLM', () => {
  it('maps content, reasoning_content and usage; sends system, history and the message', async () => {
    llm.script({
      kind: 'stream',
      chunks: [{ reasoning: 'Let me think. ' }, { content: 'Hello ' }, { content: 'there.' }],
      usage: { prompt_tokens: 42, completion_tokens: 3 },
    });
    const before = llm.requests.length;
    const events = await collect(
      runner(),
      input('hi', {
        history: [
          { role: 'user', content: 'earlier' },
          { role: 'assistant', content: 'reply' },
        ],
      }),
    );
    expect(text(events)).toBe('Hello there.');
    expect(reasoning(events)).toBe('Let me think. ');
    expect(events.at(-1)).toEqual({ type: 'done', usage: { inputTokens: 42, outputTokens: 3, reasoningTokens: 0, cachedTokens: 0, estimated: false } });
    const body = llm.requests[before]!.body;
    expect(body.model).toBe('fake-model');
    expect(body.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'user']);
    expect(body.messages[0]!.content).toBe('Be brief.');
  });

  it('estimates usage from characters when the provider reports none', async () => {
    llm.script({ kind: 'stream', chunks: [{ content: 'abcdefgh' }], usage: null });
    const events = await collect(runner(), input('x'));
    expect(events.at(-1)).toMatchObject({ type: 'done', usage: { outputTokens: 2, estimated: true } });
  });

  it('splits <think> reasoning out of content, across chunk boundaries', async () => {
    llm.script({
      kind: 'stream',
      chunks: [{ content: 'Sure. <thi' }, { content: 'nk>secret ' }, { content: 'plans</th' }, { content: 'ink>Done' }, { content: ' <' }, { content: 'b>' }],
    });
    const events = await collect(runner(), input('x'));
    expect(text(events)).toBe('Sure. Done <b>');
    expect(reasoning(events)).toBe('secret plans');
  });

  it('an answer ending in what could have been a tag keeps it; usage counts it', async () => {
    llm.script({ kind: 'stream', chunks: [{ content: '<think>hm</think>Use a ' }, { content: '<' }], usage: null });
    const events = await collect(runner(), input('x'));
    expect(text(events)).toBe('Use a <');
    expect(reasoning(events)).toBe('hm');
  });

  it('retries 500 and 429 (honouring retry-after) while nothing is visible', async () => {
    llm.script({ kind: 'status', status: 500 }, { kind: 'status', status: 429, retryAfterS: 0 }, { kind: 'stream', chunks: [{ content: 'third time lucky' }] });
    const before = llm.requests.length;
    const events = await collect(runner(), input('x'));
    expect(text(events)).toBe('third time lucky');
    expect(llm.requests.length - before).toBe(3);
  });

  it('does not retry once text is visible: the turn ends in an error with the partial text kept', async () => {
    llm.script({ kind: 'disconnect', chunks: [{ content: 'Half of ' }, { content: 'it' }] });
    const before = llm.requests.length;
    const events = await collect(runner(), input('x'));
    expect(text(events)).toBe('Half of it');
    expect(events.at(-1)).toMatchObject({ type: 'error', code: 'PROVIDER_UNAVAILABLE' });
    expect(llm.requests.length - before).toBe(1);
  });

  it('a 5xx after a tool call is not retried: the tool ran once and the turn ends in an error', async () => {
    const calls: string[] = [];
    const tools: Tool[] = [
      {
        name: 'send_mail',
        description: 'sends a mail',
        input: z.object({ to: z.string() }),
        run: ({ to }: { to: string }) => (calls.push(to), { sent: true }),
      },
    ];
    llm.script({ kind: 'stream', chunks: [{ toolCalls: [{ id: 'call_m', name: 'send_mail', arguments: '{"to":"ada"}' }] }] }, { kind: 'status', status: 500 });
    const before = llm.requests.length;
    const events = await collect(runner({ retries: 2 }), input('mail ada', { tools }));
    expect(calls).toEqual(['ada']);
    expect(llm.requests.length - before).toBe(2);
    expect(events.at(-1)).toMatchObject({ type: 'error', code: 'PROVIDER_FAILED' });
    expect(events.filter((e) => e.type === 'tool_start')).toHaveLength(1);
  });

  // An answer with no words was `done` with nothing to show: the user saw the bot type, then
  // nothing. Out of steps (tool calls to the end) or an empty reply now ends in a readable error.
  it('an answer with no text ends in ANSWER_EMPTY: an empty reply, and tool calls until the step limit', async () => {
    llm.script({ kind: 'stream', chunks: [{ reasoning: 'Hmm.' }] });
    expect((await collect(runner(), input('think'))).at(-1)).toMatchObject({
      type: 'error',
      code: 'ANSWER_EMPTY',
      message: expect.stringContaining('without an answer'),
    });
    const tools: Tool[] = [{ name: 'look', description: 'looks', input: z.object({}), run: () => 'nothing yet' }];
    const call = (i: number) => ({
      kind: 'stream' as const,
      chunks: [{ toolCalls: [{ id: `call_${i}`, name: 'look', arguments: '{}' }] }],
      finish: 'tool_calls' as const,
    });
    llm.script(call(1), call(2));
    const events = await collect(runner({ maxSteps: 2 }), input('look', { tools }));
    expect(events.filter((e) => e.type === 'tool_end')).toHaveLength(2);
    expect(events.at(-1)).toMatchObject({ type: 'error', code: 'ANSWER_EMPTY' });
    // Tools that did the work and a model that stopped on purpose: its choice, no error.
    llm.script(call(3), { kind: 'stream', chunks: [], finish: 'stop' });
    expect((await collect(runner(), input('look', { tools }))).at(-1)).toMatchObject({ type: 'done' });
    // A firing nobody typed may have nothing to say: no note asking its "sender" to rephrase.
    llm.script({ kind: 'stream', chunks: [] });
    const signal = new AbortController().signal;
    const firing = { channelId: 'c', messageId: 'schedule:s:1', synthetic: { kind: 'schedule', id: 's' } } as unknown as ChannelMessage;
    const quiet: AgentEvent[] = [];
    for await (const e of runner().run(input('anything new?'), { scope: 's', channelId: 'c', signal, message: firing }, signal)) quiet.push(e);
    expect(quiet.at(-1)).toMatchObject({ type: 'done' });
  });

  it("a tool's log lines become tool_log events of its call, between its tool_start and tool_end", async () => {
    const tools: Tool[] = [
      {
        name: 'crawl',
        description: 'crawls',
        input: z.object({}),
        run: async (_input, ctx) => {
          // One line at once (before this runner has even read the call) and one after a wait.
          ctx.log?.('page 1/2');
          await new Promise((resolve) => setImmediate(resolve));
          ctx.log?.('page 2/2');
          return 'crawled';
        },
      },
    ];
    llm.script(
      { kind: 'stream', chunks: [{ toolCalls: [{ id: 'call_c', name: 'crawl', arguments: '{}' }] }] },
      { kind: 'stream', chunks: [{ content: 'Done.' }] },
    );
    const signal = new AbortController().signal;
    const events: AgentEvent[] = [];
    // The runtime's emit: events a tool sends while it runs go straight into the turn.
    for await (const e of runner().run(input('crawl', { tools }), { scope: 's', channelId: 'c', signal, emit: (e) => void events.push(e) }, signal))
      events.push(e);
    expect(
      events
        .filter((e) => e.type.startsWith('tool_'))
        .map((e) => (e.type === 'tool_log' ? `${e.type}:${e.id}:${e.text}` : `${e.type}:${(e as { id: string }).id}`)),
    ).toEqual(['tool_start:call_c', 'tool_log:call_c:page 1/2', 'tool_log:call_c:page 2/2', 'tool_end:call_c']);
  });

  it('a failed attempt leaves none of its events: reasoning of an attempt that broke off is dropped on retry', async () => {
    llm.script(
      { kind: 'disconnect', chunks: [{ reasoning: 'first attempt thoughts ' }] },
      { kind: 'stream', chunks: [{ reasoning: 'second thoughts' }, { content: 'ok' }] },
    );
    const r = new TurnReducer();
    for (const e of await collect(runner(), input('x'))) r.fold(e);
    expect(r.turn).toMatchObject({ text: 'ok', reasoning: 'second thoughts', ending: { type: 'done' } });
  });

  it('reports every failed attempt: status, code, scrubbed provider message, retrying or not', async () => {
    const failures: unknown[] = [];
    llm.script(
      { kind: 'status', status: 503, body: '{"error":{"message":"overloaded, key sk-abcdef123456 busy"}}' },
      { kind: 'status', status: 401, body: '{"error":{"message":"bad key"}}' },
    );
    const events = await collect(runner({ apiKey: 'sk-abcdef123456', onAttemptFailed: (f) => failures.push(f) }), input('x'));
    expect(events).toEqual([
      { type: 'error', code: 'PROVIDER_AUTH_FAILED', message: 'The model provider refused our API key; the operator needs to check it.' },
    ]);
    expect(failures).toEqual([
      {
        model: 'fake-model',
        baseUrlHost: new URL(llm.url).host,
        status: 503,
        code: 'PROVIDER_FAILED',
        message: 'overloaded, key [redacted] busy',
        attempt: 1,
        retrying: true,
      },
      { model: 'fake-model', baseUrlHost: new URL(llm.url).host, status: 401, code: 'PROVIDER_AUTH_FAILED', message: 'bad key', attempt: 2, retrying: false },
    ]);
  });

  it('gives up after its retries with a readable error', async () => {
    llm.script({ kind: 'status', status: 503 }, { kind: 'status', status: 503 }, { kind: 'status', status: 500 });
    const events = await collect(runner({ retries: 2 }), input('x'));
    // Reached, and it failed: not "could not be reached" (kept for network errors, below).
    expect(events).toEqual([{ type: 'error', code: 'PROVIDER_FAILED', message: 'The model returned an error; try again.' }]);
  });

  it('does not retry a 400', async () => {
    llm.script({ kind: 'status', status: 400, body: '{"error":{"message":"bad model"}}' });
    const before = llm.requests.length;
    const events = await collect(runner(), input('x'));
    expect(events).toEqual([{ type: 'error', code: 'PROVIDER_REFUSED', message: 'The model provider refused the request.' }]);
    expect(llm.requests.length - before).toBe(1);
  });

  it('connection refused is retried, then reported', async () => {
    // Port 1 (tcpmux) is privileged and outside the ephemeral range, so no server in this
    // suite (they all listen on port 0) can ever be given it: nothing listens there. A port
    // probed free and closed again could be handed to another test file's server meanwhile.
    const events = await collect(runner({ baseUrl: 'http://127.0.0.1:1/v1', retries: 1 }), input('x'));
    expect(events).toEqual([{ type: 'error', code: 'PROVIDER_UNAVAILABLE', message: 'The model could not be reached.' }]);
  });

  it('a stall ends in PROVIDER_TIMEOUT', async () => {
    llm.script({ kind: 'stall' });
    const events = await collect(runner({ requestTimeoutMs: 150, retries: 0 }), input('x'));
    expect(events).toEqual([{ type: 'error', code: 'PROVIDER_TIMEOUT', message: 'The model did not answer in time.' }]);
  });

  it("a tool running longer than requestTimeoutMs is not cut; the model's silence after it still times out", async () => {
    const slow: Tool = {
      name: 'slow',
      description: 'takes longer than the model may be silent',
      input: z.object({}),
      run: async (_input, ctx) => {
        const startedAt = Date.now();
        await waitFor(() => Date.now() - startedAt > scaled(600) || ctx.signal.aborted, scaled(10_000), 20);
        return ctx.signal.aborted ? 'cut' : 'done slowly';
      },
    };
    llm.script({ kind: 'stream', chunks: [{ toolCalls: [{ id: 'call_1', name: 'slow', arguments: '{}' }] }] }, { kind: 'stall' });
    // The bound stretches with the time scale: a busy machine's pause before the first chunk must not be the model's silence.
    const events = await collect(runner({ requestTimeoutMs: scaled(200), retries: 0 }), input('x', { tools: [slow] }));
    expect(events.find((e) => e.type === 'tool_end')).toEqual({ type: 'tool_end', id: 'call_1', name: 'slow', output: 'done slowly' });
    expect(events.at(-1)).toEqual({ type: 'error', code: 'PROVIDER_TIMEOUT', message: 'The model did not answer in time.' });
  });

  it('cancel mid-stream yields cancelled and the fake sees the connection closed', async () => {
    llm.script({ kind: 'stream', chunks: [{ content: 'one ' }, { content: 'two ', delayMs: 2000 }] });
    const ac = new AbortController();
    const before = llm.requests.length;
    const events: AgentEvent[] = [];
    for await (const e of runner().run(input('x'), { scope: 's', channelId: 'c', signal: ac.signal }, ac.signal)) {
      events.push(e);
      if (e.type === 'text_delta') ac.abort();
    }
    expect(events.at(-1)).toEqual({ type: 'cancelled' });
    await waitFor(() => llm.requests[before]?.clientClosed);
  });

  it('runs tools through the multi-step loop: a round trip, and an error returned to the model', async () => {
    const calls: string[] = [];
    const tools: Tool[] = [
      {
        name: 'get_weather',
        description: 'weather for a city',
        input: z.object({ city: z.string() }),
        run: ({ city }: { city: string }) => (calls.push(city), { city, sky: 'clear' }),
      },
      {
        name: 'broken',
        description: 'always fails',
        input: z.object({}),
        run: () => {
          throw new Error('sensor offline');
        },
      },
    ];
    llm.script(
      {
        kind: 'stream',
        chunks: [
          {
            toolCalls: [
              { id: 'call_1', name: 'get_weather', arguments: '{"city":"Oslo"}' },
              { id: 'call_2', name: 'broken', arguments: '{}' },
            ],
          },
        ],
      },
      { kind: 'stream', chunks: [{ content: 'Clear in Oslo; the other sensor is offline.' }] },
    );
    const before = llm.requests.length;
    const events = await collect(runner(), input('weather?', { tools }));
    expect(calls).toEqual(['Oslo']);
    const toolEvents = events.filter((e) => e.type.startsWith('tool_'));
    // Both calls start before either ends; the tools run in parallel, so ends come in completion order.
    expect(toolEvents.slice(0, 2)).toEqual([
      { type: 'tool_start', id: 'call_1', name: 'get_weather', input: { city: 'Oslo' } },
      { type: 'tool_start', id: 'call_2', name: 'broken', input: {} },
    ]);
    expect(toolEvents.slice(2)).toHaveLength(2);
    expect(toolEvents.slice(2)).toEqual(
      expect.arrayContaining([
        { type: 'tool_end', id: 'call_1', name: 'get_weather', output: { city: 'Oslo', sky: 'clear' } },
        { type: 'tool_end', id: 'call_2', name: 'broken', error: 'sensor offline' },
      ]),
    );
    expect(text(events)).toBe('Clear in Oslo; the other sensor is offline.');
    const second = llm.requests[before + 1]!.body;
    expect(llm.requests[before]!.body.tools).toHaveLength(2);
    const toolMessages = second.messages.filter((m) => m.role === 'tool');
    expect(toolMessages).toHaveLength(2);
    expect(JSON.stringify(toolMessages[1]!.content)).toContain('sensor offline');
  });

  it('stops a turn that repeats itself, with a marker (the guard around the runner)', async () => {
    llm.script({ kind: 'stream', chunks: Array.from({ length: 200 }, () => ({ content: 'all work and no play ' })) });
    const events = await collect(new RepetitionGuardedRunner(runner()), input('x'));
    expect(events.at(-1)).toEqual({
      type: 'error',
      code: 'ANSWER_REPEATING',
      message: 'The answer started repeating itself, so it was stopped.',
      keepChars: 21,
    });
    expect(text(events).length).toBeLessThan(200 * 21);
  });
});

describe('RepetitionGuard', () => {
  it('does not flag ordinary prose, and flags a loop', () => {
    const g = new RepetitionGuard();
    const prose = 'The quick brown fox jumps over the lazy dog while the cat sleeps. '
      .split('')
      .map((c, i) => `${c}${i % 7 === 0 ? 'x' : ''}`)
      .join('');
    expect(g.push(prose.repeat(1))).toBeUndefined();
    const loop = new RepetitionGuard();
    let flagged = false;
    for (let i = 0; i < 80 && !flagged; i++) flagged = loop.push('I am sorry. ') !== undefined;
    expect(flagged).toBe(true);
  });
});

describe('TurnReducer', () => {
  for (const ending of [
    { type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } },
    { type: 'error', code: 'TURN_FAILED', message: 'x' },
    { type: 'cancelled' },
  ] as const) {
    it(`ends the turn once on ${ending.type}, keeping the partial output and ignoring what follows`, () => {
      const r = new TurnReducer();
      expect(r.fold({ type: 'text_delta', text: 'part' })).toBe(true);
      r.fold({ type: 'reasoning_delta', text: 'hmm' });
      expect(r.fold(ending)).toBe(true);
      expect(r.fold({ type: 'text_delta', text: 'late' })).toBe(false);
      expect(r.fold({ type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } })).toBe(false);
      expect(r.turn).toMatchObject({ text: 'part', reasoning: 'hmm', ending });
    });
  }
});

describe('FailoverRunner', () => {
  const fails = (events: AgentEvent[]): AgentRunner => ({
    name: 'scripted',
    async *run() {
      yield* events;
    },
  });
  const candidates = (first: AgentRunner, calls: string[]) => () => [
    { key: 'openai-compatible:a', model: 'a', runner: () => (calls.push('a'), first) },
    {
      key: 'openai-compatible:b',
      model: 'b',
      runner: () => (
        calls.push('b'),
        fails([
          { type: 'text_delta', text: 'from b' },
          { type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } },
        ])
      ),
    },
  ];
  const run = async (r: FailoverRunner) => {
    const out: AgentEvent[] = [];
    const signal = new AbortController().signal;
    for await (const e of r.run(input('x'), { scope: 's', channelId: 'c', signal }, signal)) out.push(e);
    return out;
  };

  it('does not fail over after a tool call: the tools would run again', async () => {
    const calls: string[] = [];
    const first = fails([
      { type: 'tool_start', id: 't1', name: 'send_mail', input: {} },
      { type: 'tool_end', id: 't1', name: 'send_mail', output: 'sent' },
      { type: 'error', code: 'PROVIDER_UNAVAILABLE', message: 'The model could not be reached.' },
    ]);
    const events = await run(new FailoverRunner(candidates(first, calls), new ModelCooldowns(() => 1000)));
    expect(calls).toEqual(['a']);
    expect(events.map((e) => e.type)).toEqual(['tool_start', 'tool_end', 'error']);
  });

  it('fails over before anything is visible, and the failed model leaves no events behind', async () => {
    const calls: string[] = [];
    const first = fails([
      { type: 'reasoning_delta', text: 'thinking on a' },
      { type: 'error', code: 'PROVIDER_UNAVAILABLE', message: 'x' },
    ]);
    const r = new TurnReducer();
    for (const e of await run(new FailoverRunner(candidates(first, calls), new ModelCooldowns(() => 1000)))) r.fold(e);
    expect(calls).toEqual(['a', 'b']);
    expect(r.turn).toMatchObject({ text: 'from b', reasoning: '', ending: { type: 'done', model: 'openai-compatible:b' } });
  });
});
