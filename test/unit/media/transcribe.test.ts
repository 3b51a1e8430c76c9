import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentSchema } from '../../../src/config/schema.js';
import { transcriberFor } from '../../../src/media/transcriber.js';

describe('transcriberFor', () => {
  let server: Server;
  let base = '';
  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      if (req.url?.startsWith('/stall/')) return; // never answers
      if (req.url?.startsWith('/html/')) return void res.writeHead(200, { 'content-type': 'text/html' }).end('<html>proxy</html>');
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"nope":1}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });

  const agent = (path: string, extra: Record<string, unknown> = {}) =>
    agentSchema.parse({ provider: 'openai-compatible', base_url: `${base}${path}`, model: 'm', transcription_model: 'whisper-1', ...extra });
  const voice = { id: 'v', type: 'voice' };

  it('is absent without a transcription model or with the echo provider', () => {
    expect(transcriberFor(agentSchema.parse({ provider: 'openai-compatible', base_url: base, model: 'm' }), undefined)).toBeUndefined();
    expect(transcriberFor(agentSchema.parse({ transcription_model: 'whisper-1' }), undefined)).toBeUndefined();
  });

  it('a stalled endpoint ends within request_timeout_ms as TRANSCRIPTION_FAILED; a bad answer is TRANSCRIPTION_FAILED', async () => {
    const stalled = transcriberFor(agent('/stall', { request_timeout_ms: 200 }), undefined)!;
    await expect(stalled(Buffer.from('x'), voice, new AbortController().signal)).rejects.toMatchObject({
      code: 'TRANSCRIPTION_FAILED',
      message: /within 200 ms/,
    });
    const html = transcriberFor(agent('/html'), undefined)!;
    await expect(html(Buffer.from('x'), voice, new AbortController().signal)).rejects.toMatchObject({ code: 'TRANSCRIPTION_FAILED', message: /not JSON/ });
    const noText = transcriberFor(agent('/json'), undefined)!;
    await expect(noText(Buffer.from('x'), voice, new AbortController().signal)).rejects.toMatchObject({ code: 'TRANSCRIPTION_FAILED', message: /no "text"/ });
  });

  it("the turn's own abort is passed through, not turned into a transcription failure", async () => {
    const stalled = transcriberFor(agent('/stall'), undefined)!;
    const turn = new AbortController();
    const done = stalled(Buffer.from('x'), voice, turn.signal);
    turn.abort(new Error('stopped'));
    await expect(done).rejects.toThrow('stopped');
  });
});
