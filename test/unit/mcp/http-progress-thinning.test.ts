import { type EventSourceMessage, EventSourceParserStream } from 'eventsource-parser/stream';
import { describe, expect, it, onTestFinished } from 'vitest';
import { mcpServerSchema } from '../../../src/config/schema.js';
import { McpServer } from '../../../src/mcp/server.js';
import { thinProgressEvents } from '../../../src/mcp/sse-progress.js';
import { PROGRESS_PARSE_INTERVAL_MS } from '../../../src/mcp/stdio-buffer.js';
import { FLOOD_TOOL, withHttpMcp, type HttpMcpOptions } from '../../fixtures/mcp/http-server.js';
import { quietLogger } from '../../helpers/cluster.js';
import { waitFor } from '../../helpers/daemon.js';
import { scaled } from '../../helpers/timing.js';

/** channeld's client of the fixture server, connected; stopped when the test finishes. */
async function connect(o: HttpMcpOptions) {
  const fixture = await withHttpMcp(o);
  const server = new McpServer('a', mcpServerSchema.parse({ name: 'h', url: fixture.url }), quietLogger().log, {});
  server.start();
  onTestFinished(() => server.stop(1000));
  await waitFor(() => server.status().state === 'connected', scaled(10_000), 20);
  return { fixture, server };
}

/** Calls FLOOD_TOOL, recording each progress channeld is told of; `elapsedMs` on the clock the thinning reads. */
async function flood(server: McpServer, args: { count: number; closeAfter?: number }) {
  const seen: { progress: number; total: number | undefined; message: string | undefined }[] = [];
  const startedAt = Date.now();
  const result = await server.call(FLOOD_TOOL, args, {
    signal: new AbortController().signal,
    timeoutMs: scaled(30_000),
    onProgress: (progress, total, message) => seen.push({ progress, total, message }),
  });
  return { result, seen, elapsedMs: Date.now() - startedAt };
}

/**
 * The most progress one stream can pass in `elapsedMs`: the first at once, one more each
 * interval after it, and the latest held one before the result (or at the stream's end).
 */
const mostPassed = (elapsedMs: number) => Math.floor(elapsedMs / PROGRESS_PARSE_INTERVAL_MS) + 2;

const increasing = (values: number[]) => values.every((v, i) => i === 0 || v > values[i - 1]!);

describe('progress notifications over Streamable HTTP are thinned before the SDK parses them', () => {
  it('a burst of 5,000 reaches the progress callback at most once an interval; the last one and the result arrive intact', async () => {
    const { server } = await connect({ flood: true });
    const { result, seen, elapsedMs } = await flood(server, { count: 5000 });
    expect(result.content).toEqual([{ type: 'text', text: 'flooded 5000' }]);
    expect(seen.length).toBeLessThanOrEqual(mostPassed(elapsedMs));
    expect(seen.at(-1)).toEqual({ progress: 5000, total: 5000, message: 'step 5000' });
    expect(increasing(seen.map((s) => s.progress))).toBe(true);
  });

  it('a stream the server closes midway resumes from the last event id the SDK saw: nothing lost, nothing twice', async () => {
    const { fixture, server } = await connect({ flood: true, resumable: true });
    const { result, seen, elapsedMs } = await flood(server, { count: 2000, closeAfter: 1000 });
    expect(fixture.resumed).toBeGreaterThanOrEqual(1);
    expect(result.content).toEqual([{ type: 'text', text: 'flooded 2000' }]);
    // Two streams (the call's, then the one that resumed it), each thinned.
    expect(seen.length).toBeLessThanOrEqual(2 * mostPassed(elapsedMs));
    expect(seen.at(-1)).toMatchObject({ progress: 2000 });
    // Resumed from an id past every progress already reported: none of them is sent again.
    expect(increasing(seen.map((s) => s.progress))).toBe(true);
  });
});

const progress = (n: number) => JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: n } });
const log = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'halfway' } });
/** A response that names the progress method in its content: a response all the same. */
const answer = JSON.stringify({ jsonrpc: '2.0', id: 1, result: { structuredContent: { method: 'notifications/progress' } } });

/** A stream with every shape of event: CRLF, CR and LF line ends, ids or none, data over several lines, comments. */
const STREAM = [
  `event: message\r\nid: 1\r\ndata: ${progress(1)}\r\n\r\n`,
  // One progress over two data lines (the parser joins them with a line end, which JSON allows).
  `id: 2\ndata: ${progress(2).replace(',"params"', ',\ndata: "params"')}\n\n`,
  `: a comment\rdata:${progress(3)}\r\r`, // no id: it carries id 2 when it takes 2's place
  `id: 4\r\ndata: ${log}\r\n\r\n`,
  `id: 5\ndata: ${progress(5)}\n\n`,
  `event: other\ndata: ${progress(6)}\n\n`, // a type the SDK skips: passed as it is
  `id: 7\r\ndata: ${progress(7)}\r\n\r\n`,
  `id: 8\r\ndata: ${progress(8)}\r\n\r\n`,
  `id: 9\ndata: ${answer}\n\n`,
  `id: 10\ndata: ${progress(10)}\n\n`,
  `id: 11\ndata: ${progress(11)}\n\n`,
].join('');

/** The events the SDK's parser reads from STREAM in `chunks`, through the thinning. */
async function thinned(chunks: string[], intervalMs: number): Promise<EventSourceMessage[]> {
  const encoder = new TextEncoder();
  const source = new ReadableStream<Uint8Array>({
    start(c) {
      for (const chunk of chunks) c.enqueue(encoder.encode(chunk));
      c.close();
    },
  });
  const events: EventSourceMessage[] = [];
  const reader = source.pipeThrough(thinProgressEvents(intervalMs)).pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
  for (let r = await reader.read(); !r.done; r = await reader.read()) events.push(r.value);
  return events;
}

/** STREAM cut in two at every byte, and in one-byte chunks: inside events, lines and CRLFs. */
function cuts(): string[][] {
  const inTwo = Array.from({ length: STREAM.length - 1 }, (_, i) => [STREAM.slice(0, i + 1), STREAM.slice(i + 1)]);
  return [[STREAM], [...STREAM], ...inTwo];
}

const read = (e: EventSourceMessage) => ({ id: e.id, event: e.event, data: JSON.parse(e.data) as unknown });

describe('thinProgressEvents (the transform alone)', () => {
  it('within the interval: the first progress passes, the latest of the rest goes out before the next other event and at the end', async () => {
    // An interval no test outlasts: every progress after the first is held.
    const expected = [
      { id: '1', event: 'message', data: JSON.parse(progress(1)) },
      { id: '2', event: undefined, data: JSON.parse(progress(3)) }, // in place of 2 and 3, with 2's id
      { id: '4', event: undefined, data: JSON.parse(log) },
      { id: '5', event: undefined, data: JSON.parse(progress(5)) },
      { id: undefined, event: 'other', data: JSON.parse(progress(6)) },
      { id: '8', event: undefined, data: JSON.parse(progress(8)) },
      { id: '9', event: undefined, data: JSON.parse(answer) },
      { id: '11', event: undefined, data: JSON.parse(progress(11)) },
    ];
    for (const chunks of cuts()) expect((await thinned(chunks, 1e9)).map(read), JSON.stringify(chunks.map((c) => c.length))).toEqual(expected);
  });

  it('once the interval has passed every event goes through, as the parser reads it without the thinning', async () => {
    const direct = async () => {
      const events: EventSourceMessage[] = [];
      const parser = new ReadableStream<string>({ start: (c) => (c.enqueue(STREAM), c.close()) }).pipeThrough(new EventSourceParserStream()).getReader();
      for (let r = await parser.read(); !r.done; r = await parser.read()) events.push(r.value);
      return events.map(read);
    };
    const all = await direct();
    expect(all).toHaveLength(11);
    for (const chunks of cuts()) expect((await thinned(chunks, 0)).map(read)).toEqual(all);
  });

  it('an event the stream ends inside of is passed on after the held progress (the parser drops it, as it would have)', async () => {
    const events = await thinned([`data: ${progress(1)}\n\ndata: ${progress(2)}\n\ndata: ${progress(3)}\n\ndata: {"jsonrpc"`], 1e9);
    expect(events.map((e) => JSON.parse(e.data))).toEqual([JSON.parse(progress(1)), JSON.parse(progress(3))]);
  });
});
