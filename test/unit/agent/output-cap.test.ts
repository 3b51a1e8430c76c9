import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { OpenAICompatibleRunner, type AttemptFailure } from '../../../src/agent/openai-compatible.js';
import { boundedEventFetch, OutputCap, outputCapChars } from '../../../src/agent/output-cap.js';
import { TurnReducer } from '../../../src/agent/reducer.js';
import type { AgentEvent } from '../../../src/contracts/agent-events.js';
import { userText } from '../../../src/contracts/errors.js';
import type { Tool } from '../../../src/contracts/tools.js';
import { FakeLlm } from '../../fakes/llm/server.js';

/**
 * A model server that ignores max_tokens: it streams OpenAI chat.completion.chunk frames
 * (content, reasoning_content, or one event that never ends) until the client hangs up.
 * The shared fake (test/fakes/llm) only streams a finite list of chunks.
 */
type Kind = 'content' | 'reasoning' | 'endless-event';
let server: Server;
let url = '';
const requests: Array<{ kind: Kind; maxTokens: unknown; closed: Promise<void> }> = [];

async function endless(req: IncomingMessage, res: ServerResponse): Promise<void> {
  let raw = '';
  for await (const c of req) raw += String(c);
  const body = JSON.parse(raw) as { messages: Array<{ role: string; content: unknown }>; max_tokens?: unknown };
  const kind = String(body.messages.at(-1)?.content) as Kind;
  let gone = false;
  const closed = new Promise<void>((r) => res.once('close', () => r()));
  void closed.then(() => (gone = true));
  requests.push({ kind, maxTokens: body.max_tokens, closed });
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const frame = (delta: object) =>
    `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
  if (kind === 'endless-event') res.write(`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"`);
  for (let n = 0; !gone; n++) {
    const piece =
      kind === 'endless-event' ? 'a'.repeat(16 * 1024) : frame(kind === 'content' ? { content: `word${n} ` } : { reasoning_content: `thought${n} ` });
    // Backpressure, not a timer: it writes as fast as the client reads, forever.
    if (!res.write(piece)) await Promise.race([new Promise((r) => res.once('drain', r)), closed]);
  }
}

beforeAll(async () => {
  server = createServer((req, res) => void endless(req, res).catch(() => res.destroy()));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

async function turn(kind: Kind, maxOutputTokens = 16) {
  const failures: AttemptFailure[] = [];
  const runner = new OpenAICompatibleRunner({
    baseUrl: url,
    model: 'm',
    maxOutputTokens,
    requestTimeoutMs: 60_000, // never the idle timer: the model never pauses
    maxSteps: 4,
    timeZone: 'UTC',
    retryBaseMs: 1,
    onAttemptFailed: (f) => failures.push(f),
  });
  const before = requests.length;
  const signal = new AbortController().signal;
  const reducer = new TurnReducer();
  const events: AgentEvent[] = [];
  for await (const e of runner.run({ system: 's', history: [], text: kind }, { scope: 's', channelId: 'c', signal }, signal)) {
    events.push(e);
    reducer.fold(e);
  }
  return { events, turn: reducer.turn, failures, requests: requests.slice(before) };
}

describe('a model that never stops writing', () => {
  it('is cut at max_output_tokens × 16 characters with ANSWER_TOO_LONG; the text streamed stays', { timeout: 5000 }, async () => {
    const { events, turn: t, failures, requests: reqs } = await turn('content');
    expect(reqs).toHaveLength(1); // no retry: text was visible
    expect(reqs[0]!.maxTokens).toBe(16);
    expect(t.text.length).toBe(outputCapChars(16));
    expect(t.text.startsWith('word0 word1 ')).toBe(true);
    expect(events.at(-1)).toEqual({ type: 'error', code: 'ANSWER_TOO_LONG', message: userText('ANSWER_TOO_LONG') });
    expect(t.ending).toMatchObject({ type: 'error', code: 'ANSWER_TOO_LONG' });
    expect(failures).toMatchObject([{ code: 'ANSWER_TOO_LONG', retrying: false, attempt: 1 }]);
    await reqs[0]!.closed; // the request was aborted, not left streaming
  });

  it('counts reasoning too, and does not retry a model that only thinks', { timeout: 5000 }, async () => {
    const { events, turn: t, requests: reqs } = await turn('reasoning');
    expect(reqs).toHaveLength(1);
    expect(t.text).toBe('');
    expect(events.at(-1)).toMatchObject({ type: 'error', code: 'ANSWER_TOO_LONG' });
    await reqs[0]!.closed;
  });

  it('fails one server-sent event that never ends, at 1 MiB, before the idle timeout', { timeout: 5000 }, async () => {
    const { events, failures, requests: reqs } = await turn('endless-event');
    expect(reqs).toHaveLength(1);
    expect(events.at(-1)).toMatchObject({ type: 'error', code: 'ANSWER_TOO_LONG' });
    expect(failures[0]!.message).toContain('one server-sent event passed 1048576 bytes');
    await reqs[0]!.closed;
  });
});

describe('the cap is per model call', () => {
  it('a turn of two calls, each under the cap, writes more than one cap in all and ends done', async () => {
    const llm = new FakeLlm();
    await llm.start();
    try {
      const tools: Tool[] = [{ name: 'note', description: 'notes', input: z.object({ text: z.string() }), run: () => ({ ok: true }) }];
      const args = JSON.stringify({ text: 'x'.repeat(40) }); // 51 characters of tool input
      const answer = 'y'.repeat(60);
      llm.script(
        { kind: 'stream', chunks: [{ content: 'z'.repeat(10) }, { toolCalls: [{ id: 'call_1', name: 'note', arguments: args }] }] },
        { kind: 'stream', chunks: [{ content: answer.slice(0, 30) }, { content: answer.slice(30) }] },
      );
      const runner = new OpenAICompatibleRunner({ baseUrl: llm.url, model: 'm', maxOutputTokens: 4, requestTimeoutMs: 5000, maxSteps: 4, timeZone: 'UTC' });
      const signal = new AbortController().signal;
      const reducer = new TurnReducer();
      for await (const e of runner.run({ system: 's', history: [], text: 'go', tools }, { scope: 's', channelId: 'c', signal }, signal)) reducer.fold(e);
      expect(reducer.turn.ending).toMatchObject({ type: 'done' });
      expect(reducer.turn.text).toBe(`${'z'.repeat(10)}${answer}`); // 70 characters, past one call's 64
      expect(llm.requests).toHaveLength(2);
    } finally {
      await llm.close();
    }
  });
});

describe('OutputCap', () => {
  it('keeps what fits, never half a surrogate pair, and resets per call', () => {
    const cap = new OutputCap(5);
    expect(cap.take('abc')).toBe('abc');
    expect(cap.over).toBe(false);
    expect(cap.take('d😀x')).toBe('d');
    expect(cap.over).toBe(true);
    cap.reset();
    expect(cap.take('12345')).toBe('12345');
    expect(cap.over).toBe(false);
  });
});

describe('boundedEventFetch', () => {
  const bodyOf = (parts: string[]) =>
    new ReadableStream<Uint8Array>({
      start(c) {
        for (const p of parts) c.enqueue(new TextEncoder().encode(p));
        c.close();
      },
    });
  const read = async (parts: string[], limit: number) => {
    const f = boundedEventFetch(limit, async () => new Response(bodyOf(parts), { headers: { 'content-type': 'text/event-stream' } }));
    return (await f('http://x/')).text();
  };

  it('passes many small events, with LF, CRLF or CR line ends split across chunks', async () => {
    const events = ['data: 12345\n\n', 'data: 12345\r\n\r', '\ndata: 123', '45\r\rdata: 1\ndata: 2345\n\n'];
    await expect(read(events, 20)).resolves.toBe(events.join(''));
  });

  it('fails an event longer than the limit, even made of many lines', async () => {
    await expect(read(['data: 1\n', 'data: 2\n', 'data: 3\n'], 20)).rejects.toMatchObject({ code: 'ANSWER_TOO_LONG' });
  });
});
