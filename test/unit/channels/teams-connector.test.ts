import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { ConnectorError, classifyTeamsError, connectorCall } from '../../../channels/teams/connector.js';
import { BotToken } from '../../../channels/teams/token.js';
import { isRetryable } from '../../../src/contracts/errors.js';
import { waitFor } from '../../helpers/daemon.js';
import { withChannelDaemon } from '../../helpers/fixtures.js';
import { teamsChannel, teamsEnv, withTeams } from '../../helpers/teams.js';
import { echoAgent } from '../../helpers/toml.js';

// A Connector that answers a reply with far more than any activity id, and a token endpoint that fails.
let server: Server;
let serviceUrl: string;
const token = { get: async () => 'bot-token', reset: () => {} } as unknown as BotToken;
/** The client_id of each request the failing token endpoint got. */
const tokenAskedBy: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/token') {
        tokenAskedBy.push(new URLSearchParams(Buffer.concat(chunks).toString('utf8')).get('client_id') ?? '');
        return res.writeHead(500, { 'content-type': 'application/json' }).end('{}');
      }
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

describe("the Connector's transient refusals", () => {
  it('412, 502 and 504 are tried again (Teams asks for it); 400 and 404 are not', () => {
    const failure = (status: number) =>
      classifyTeamsError(new ConnectorError(status, undefined, undefined, `PUT /v3/conversations/c/activities/1: ${status}`), 'update');
    for (const status of [412, 502, 504]) expect(isRetryable(failure(status))).toBe(true);
    for (const status of [400, 404]) expect(isRetryable(failure(status))).toBe(false);
  });

  it('a 412 on an update in a group chat is tried again: one message, the whole answer', async () => {
    const ms = await withTeams();
    // A word every 80 ms: the answer is drafted, then its end goes as an update of the draft.
    const d = await withChannelDaemon(echoAgent(80) + teamsChannel(ms), teamsEnv(ms));
    ms.webhook = `${d.url}/webhooks/ms`;
    ms.fail('update', { status: 412, code: 'PreconditionFailed' });
    const text = Array.from({ length: 25 }, (_, i) => `word${i}`).join(' ');
    expect(await ms.post(ms.activity(text, { kind: 'groupChat', mention: true }))).toBe(200);
    const group = '19:group@thread.v2';
    await waitFor(() => ms.texts(group).includes(text), 20_000);
    await waitFor(() => d.daemon.status().turns.in_flight === 0, 10_000);
    expect(ms.texts(group)).toEqual([text]);
    expect(ms.callsOf('reply')).toHaveLength(1);
    expect(ms.callsOf('update').length).toBeGreaterThanOrEqual(2);
  });
});

describe("the bot's own token", () => {
  it('a caller already gone starts no fetch, and no failure of a shared fetch goes unhandled', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    onTestFinished(() => void process.off('unhandledRejection', onUnhandled));
    const tokenUrl = `${serviceUrl}token`;
    const gone = new AbortController();
    gone.abort(new Error('the turn was stopped'));
    await expect(new BotToken(tokenUrl, 'gone', 'pw').get(gone.signal)).rejects.toThrow('the turn was stopped');
    // Another bot asks after it: answered after the first one's fetch, had it sent one.
    await expect(new BotToken(tokenUrl, 'probe', 'pw').get(AbortSignal.timeout(10_000))).rejects.toMatchObject({ code: 'CHANNEL_UNAVAILABLE' });
    await new Promise(setImmediate);
    expect(unhandled).toEqual([]);
    expect(tokenAskedBy).toEqual(['probe']);
  });
});
