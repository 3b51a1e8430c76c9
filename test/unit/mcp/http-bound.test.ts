import { once } from 'node:events';
import { createServer, type ServerResponse } from 'node:http';
import { describe, expect, it, onTestFinished } from 'vitest';
import { ANSWER_TOO_LARGE, boundedMcpFetch, MAX_HTTP_ERROR_BODY_BYTES, MAX_HTTP_MESSAGE_BYTES } from '../../../src/mcp/http-bound.js';
import { waitFor } from '../../helpers/daemon.js';

const ENDLESS_BYTES = 40 * 1024 * 1024;

/** An HTTP server answering every request with `head`, then `x` until 40 MiB are written or the client goes; counts what it wrote. */
async function endless(status: number, contentType: string, head: string) {
  const sent = { bytes: 0, closed: false };
  const http = createServer(async (req, res: ServerResponse) => {
    for await (const _ of req);
    res.once('close', () => (sent.closed = true));
    res.writeHead(status, { 'content-type': contentType });
    res.write(head);
    const chunk = Buffer.alloc(64 * 1024, 'x');
    while (sent.bytes < ENDLESS_BYTES && !res.destroyed) {
      sent.bytes += chunk.length;
      // Written as fast as the client reads, no faster: what it never reads is never sent.
      if (!res.write(chunk)) await Promise.race([once(res, 'drain'), once(res, 'close')]);
    }
    res.end();
  });
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
  onTestFinished(() => new Promise<void>((r) => (http.closeAllConnections(), http.close(() => r()))));
  return { url: `http://127.0.0.1:${(http.address() as { port: number }).port}/mcp`, sent };
}

const post = (id: number) => ({ method: 'POST', body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'big' } }) });

describe('boundedMcpFetch (the Streamable HTTP answers bound)', () => {
  it('one event past the bound becomes an error answer to the request; the rest of the stream is never read', async () => {
    const s = await endless(200, 'text/event-stream', 'data: {"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"');
    const res = await boundedMcpFetch()(s.url, post(7));
    const text = await res.text();
    const events = text.split('\n\n').filter((e) => e.startsWith('data: {"jsonrpc"') && !e.includes('"result"'));
    expect(events.map((e) => JSON.parse(e.slice('data: '.length)))).toEqual([
      { jsonrpc: '2.0', id: 7, error: { code: ANSWER_TOO_LARGE, message: `the MCP server's answer passed ${MAX_HTTP_MESSAGE_BYTES} bytes` } },
    ]);
    expect(text).toContain('\nevent: dropped\n\n');
    await waitFor(() => s.sent.closed, 10_000);
    // The bound plus what the sockets held: far from the 40 MiB the server meant to send.
    expect(s.sent.bytes).toBeLessThan(MAX_HTTP_MESSAGE_BYTES + 12 * 1024 * 1024);
  });

  it('a JSON answer past the bound is replaced by the error answer, read no further', async () => {
    const s = await endless(200, 'application/json', '{"jsonrpc":"2.0","id":"a","result":{"content":[{"type":"text","text":"');
    const res = await boundedMcpFetch()(s.url, post(3));
    expect(await res.json()).toEqual([
      { jsonrpc: '2.0', id: 3, error: { code: ANSWER_TOO_LARGE, message: `the MCP server's answer passed ${MAX_HTTP_MESSAGE_BYTES} bytes` } },
    ]);
    await waitFor(() => s.sent.closed, 10_000);
    expect(s.sent.bytes).toBeLessThan(MAX_HTTP_MESSAGE_BYTES + 12 * 1024 * 1024);
  });

  it("a refusal's body is cut to its first bytes: it only becomes an error message", async () => {
    const s = await endless(500, 'text/plain', 'broken: ');
    const res = await boundedMcpFetch()(s.url, post(1));
    expect(res.status).toBe(500);
    const text = await res.text();
    expect(text.length).toBe(MAX_HTTP_ERROR_BODY_BYTES);
    expect(text.startsWith('broken: xxx')).toBe(true);
  });

  it('an event past the bound on the stream the server opened (no request to answer) fails the stream', async () => {
    const s = await endless(200, 'text/event-stream', 'data: ');
    const res = await boundedMcpFetch()(s.url, { method: 'GET' });
    await expect(res.text()).rejects.toMatchObject({ code: 'MCP_ANSWER_TOO_LARGE' });
  });
});
