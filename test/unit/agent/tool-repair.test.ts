import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { AgentEvent } from '../../../src/contracts/agent-events.js';
import { OpenAICompatibleRunner } from '../../../src/agent/openai-compatible.js';
import { lenientArguments, REPAIR_HINT } from '../../../src/agent/tool-repair.js';
import type { AgentInput } from '../../../src/contracts/agent-runner.js';
import type { Tool } from '../../../src/contracts/tools.js';
import { FakeLlm, type Script } from '../../fakes/llm/server.js';
import { waitFor } from '../../helpers/daemon.js';
import { withPipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

let llm: FakeLlm;
beforeAll(async () => {
  llm = new FakeLlm();
  await llm.start();
});
afterAll(() => llm.close());

/** A tool a small model gets wrong: a number, a boolean and a string to fill in. */
function forecastTool(calls: unknown[]): Tool {
  return {
    name: 'forecast',
    description: 'weather forecast for a city',
    input: z.object({ city: z.string(), days: z.number().int(), metric: z.boolean().optional() }),
    run: (input: unknown) => (calls.push(input), 'sunny'),
  };
}

const call = (id: string, args: string): Script => ({ kind: 'stream', chunks: [{ toolCalls: [{ id, name: 'forecast', arguments: args }] }] });
const answer = (text: string): Script => ({ kind: 'stream', chunks: [{ content: text }] });

async function turn(tools: Tool[], invalid: Array<[string, boolean]> = []): Promise<AgentEvent[]> {
  const r = new OpenAICompatibleRunner({
    baseUrl: llm.url,
    model: 'small-local',
    maxOutputTokens: 256,
    requestTimeoutMs: 5000,
    maxSteps: 6,
    timeZone: 'UTC',
    retryBaseMs: 10,
    onToolCallInvalid: (tool, repaired) => void invalid.push([tool, repaired]),
  });
  const input: AgentInput = { system: 'Use tools.', history: [], text: 'weather?', tools };
  const signal = new AbortController().signal;
  const out: AgentEvent[] = [];
  for await (const e of r.run(input, { scope: 's', channelId: 'c', signal }, signal)) out.push(e);
  return out;
}

describe('lenientArguments', () => {
  const schema = {
    type: 'object' as const,
    properties: { city: { type: 'string' as const }, days: { type: 'integer' as const }, metric: { type: 'boolean' as const } },
  };
  it('fixes trailing commas, single quotes, unquoted keys, and obvious types', () => {
    expect(lenientArguments(`{'city': 'Oslo', 'days': 3,}`, schema)).toBe('{"city":"Oslo","days":3}');
    expect(lenientArguments('{city: "Oslo", days: "3", metric: "true"}', schema)).toBe('{"city":"Oslo","days":3,"metric":true}');
    expect(lenientArguments('{"city": 42, "days": 2}', schema)).toBe('{"city":"42","days":2}');
  });
  it('leaves what it cannot be sure of', () => {
    expect(lenientArguments('{"city": "Oslo", "days": "three"}', schema)).toBe('{"city":"Oslo","days":"three"}');
    expect(lenientArguments('{"city": "Oslo", "days": "2.5"}', schema)).toBe('{"city":"Oslo","days":"2.5"}');
    expect(lenientArguments(`{"city": "${'x'.repeat(70_000)}"}`, schema)).toBeUndefined();
  });
});

describe('tool-call repair against a small local model (the fake LLM)', () => {
  it('repairs trailing commas, single quotes and a numeric string in one step: the tool runs, the event says so', async () => {
    const calls: unknown[] = [];
    const invalid: Array<[string, boolean]> = [];
    const before = llm.requests.length;
    llm.script(call('c1', `{'city': 'Oslo', 'days': '3',}`), answer('Sunny for three days.'));
    const events = await turn([forecastTool(calls)], invalid);
    expect(calls).toEqual([{ city: 'Oslo', days: 3 }]);
    expect(events.find((e) => e.type === 'tool_call_invalid')).toMatchObject({ id: 'c1', name: 'forecast', repaired: true });
    expect(events.findIndex((e) => e.type === 'tool_call_invalid')).toBeLessThan(events.findIndex((e) => e.type === 'tool_start'));
    expect(events.find((e) => e.type === 'tool_end')).toMatchObject({ output: 'sunny' });
    expect(events.at(-1)).toMatchObject({ type: 'done' });
    expect(invalid).toEqual([['forecast', true]]);
    expect(llm.requests.length - before).toBe(2); // no extra model round trip
  });

  it('what cannot be repaired goes back to the model with the error and a hint; its retry runs', async () => {
    const calls: unknown[] = [];
    const invalid: Array<[string, boolean]> = [];
    const before = llm.requests.length;
    llm.script(call('c1', '{"city": "Oslo", "days": "a few"}'), call('c2', '{"city": "Oslo", "days": 2}'), answer('Sunny.'));
    const events = await turn([forecastTool(calls)], invalid);
    expect(events.find((e) => e.type === 'tool_call_invalid')).toMatchObject({ id: 'c1', repaired: false, error: expect.stringContaining('days') });
    expect(calls).toEqual([{ city: 'Oslo', days: 2 }]);
    const retry = llm.requests[before + 1]!.body.messages.find((m) => m.role === 'tool');
    expect(String(retry!.content)).toContain(REPAIR_HINT);
    expect(events.at(-1)).toMatchObject({ type: 'done' });
    expect(invalid).toEqual([['forecast', false]]);
  });

  it('a second failure of the same tool ends the turn in a readable error: one retry, bounded', async () => {
    const calls: unknown[] = [];
    const invalid: Array<[string, boolean]> = [];
    const before = llm.requests.length;
    llm.script(call('c1', 'days=3 city=Oslo'), call('c2', '{"days": "many"}'));
    const events = await turn([forecastTool(calls)], invalid);
    expect(calls).toEqual([]);
    expect(llm.requests.length - before).toBe(2);
    expect(events.at(-1)).toEqual({
      type: 'error',
      code: 'TOOL_CALL_INVALID',
      message: 'The model could not form a valid tool call; try rephrasing, or a larger model.',
    });
    expect(invalid).toEqual([
      ['forecast', false],
      ['forecast', false],
    ]);
  });

  it('a workspace reports each bad call to its observer (the metric) and the user still gets the answer', async () => {
    const seen: Array<[string, string, boolean]> = [];
    const p = withPipeline(`[agent]\nprovider = "openai-compatible"\nmodel = "small-local"\nbase_url = "${llm.url}"\n`, '', {
      workspace: { onToolCallInvalid: (agent, tool, repaired) => void seen.push([agent, tool, repaired]) },
    });
    llm.script({ kind: 'stream', chunks: [{ toolCalls: [{ id: 'c1', name: 'current_time', arguments: `{'time_zone': 'UTC',}` }] }] }, answer('It is noon.'));
    await p.dispatcher.deliver(userMessage('t', 'what time is it', { chat: { id: 'c', type: 'dm' } }));
    await waitFor(() => p.adapter.visible('c').includes('It is noon.'));
    expect(seen).toEqual([['default', 'current_time', true]]);
    expect(p.logs.lines.some((l) => l.includes('repaired the arguments of a call to current_time'))).toBe(true);
  });
});
