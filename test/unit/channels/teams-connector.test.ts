import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConnectorError, connectorCall } from '../../../channels/teams/connector.js';
import type { BotToken } from '../../../channels/teams/token.js';

// A Connector that answers a reply with far more than any activity id.
let server: Server;
let serviceUrl: string;
const token = { get: async () => 'bot-token', reset: () => {} } as unknown as BotToken;

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url!.endsWith('/huge')) return res.writeHead(200, { 'content-type': 'application/json' }).end(`{"id":"${'x'.repeat(2 * 1024 * 1024)}"}`);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"id":"a1"}');
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  serviceUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});

afterAll(() => {
  server.closeAllConnections();
  server.close();
});

describe('the Teams Connector client', () => {
  it('reads an answer within 1 MiB and refuses a larger one instead of buffering it', async () => {
    const signal = AbortSignal.timeout(10_000);
    expect(await connectorCall<{ id: string }>(token, serviceUrl, 'POST', '/v3/conversations/c/activities', { text: 'hi' }, signal)).toEqual({ id: 'a1' });
    const err = await connectorCall(token, serviceUrl, 'POST', '/v3/conversations/c/activities/huge', { text: 'hi' }, signal).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectorError);
    expect((err as Error).message).toMatch(/larger than 1048576 bytes/);
  });
});
