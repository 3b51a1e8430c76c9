import { chartReport } from '../../../src/observe/chart-report.js';
import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { checkAdmin } from '../../../src/actions/access.js';
import { defineAction, type ManagementApi } from '../../../src/actions/action.js';
import { builtinActions } from '../../../src/actions/builtin/index.js';
import { parseSince } from '../../../src/actions/builtin/usage.js';
import { ActionRegistry, EXIT_STATUS_HEADER } from '../../../src/actions/registry.js';
import { CHANNEL_HEADER, channelRow, table } from '../../../src/actions/table.js';
import { HttpServer } from '../../../src/observe/http-server.js';
import { SqliteUsageLedger } from '../../../src/store/usage-ledger.js';
import { pingAction } from '../../fixtures/actions/ping.js';
import { waitFor } from '../../helpers/daemon.js';
import { pipeline, type Pipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

// The action registry over a real turn pipeline (dispatcher, SQLite) and a real HTTP server:
// the management API below is what the daemon's is, minus status and reload (the e2e tests
// drive those through a whole daemon).

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}
function send(port: number, o: { method?: string; path: string; headers?: Record<string, string>; body?: string }): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: o.method ?? 'GET', path: o.path, headers: o.headers ?? {} }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(parts).toString('utf8') }));
    });
    req.on('error', reject);
    if (o.body !== undefined) req.write(o.body);
    req.end();
  });
}
const json = { 'content-type': 'application/json' };

describe('ActionRegistry', () => {
  let p: Pipeline | undefined;
  let http: HttpServer | undefined;
  afterEach(async () => {
    await http?.close();
    await p?.close();
    p = http = undefined;
  });

  async function setup(adminToken?: string) {
    const apiOf = (pl: () => Pipeline): ManagementApi => {
      const usage = () => new SqliteUsageLedger(pl().db);
      return {
        status: () => {
          throw new Error('status is not part of this test');
        },
        reload: () => Promise.reject(new Error('reload is not part of this test')),
        turns: () => pl().dispatcher.tracker.list(),
        stopTurn: async (id) => pl().dispatcher.stopTurn(id),
        sessions: async () => {
          const rows = pl().sessions.summary('default', 't:');
          return [{ channel: 't', agent: 'default', conversations: rows.length, sessions: rows.reduce((n, r) => n + r.sessions, 0), last_activity: null }];
        },
        conversation: (_agent, scope) => pl().workspace.conversationStatus(scope),
        usage: async (filter) => ({ rows: await usage().breakdown(filter), total: await usage().totals(filter) }),
        budget: () => undefined,
        quotaStanding: async () => [],
        quotaTop: async () => [],
        charts: async (minutes) => chartReport([], minutes),
      };
    };
    const registry = new ActionRegistry(apiOf(() => p!));
    for (const a of builtinActions) registry.register(a);
    p = pipeline(`[agent]\nprovider = "echo"\necho_delay_ms = 200\n`, '', { workspace: { actions: registry } });
    http = new HttpServer();
    const { port } = await http.listen('127.0.0.1', 0);
    registry.attachHttp(http, () => adminToken);
    return { registry, port };
  }

  it('each action gets a route by its kind (GET read-only, POST otherwise); GET /actions describes them for the CLI', async () => {
    const { port } = await setup();
    const list = JSON.parse((await send(port, { path: '/actions' })).body) as Array<{
      name: string;
      method: string;
      path: string;
      cli: string;
      args: string[];
    }>;
    expect(list.find((a) => a.name === 'stop-turn')).toMatchObject({ method: 'POST', path: '/actions/stop-turn', cli: 'stop-turn', args: ['id'] });
    expect(list.find((a) => a.name === 'turns')).toMatchObject({ method: 'GET', path: '/actions/turns' });
    expect((await send(port, { method: 'POST', path: '/actions/turns', headers: json, body: '{}' })).status).toBe(405);
    expect((await send(port, { path: '/actions/stop-turn' })).status).toBe(405);
    expect((await send(port, { path: '/actions/nope' })).status).toBe(404);
    expect(JSON.parse((await send(port, { path: '/actions/version' })).body)).toMatchObject({ node: process.version });
  });

  it('stop-turn: input checked against its schema (400), an unknown id is 404, a running turn is cancelled', async () => {
    const { port } = await setup();
    const post = (body: string) => send(port, { method: 'POST', path: '/actions/stop-turn', headers: json, body });
    const bad = await post('{"id":""}');
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.body).error).toMatch(/id/);
    expect((await post('{"id": 7}')).status).toBe(400);
    expect((await post('{not json')).status).toBe(400);
    expect(JSON.parse((await post('{"id":"999"}')).body).error).toMatch(/^no running or queued turn has id 999/);
    expect((await post('{"id":"999"}')).status).toBe(404);
    await p!.dispatcher.deliver(userMessage('t', 'one two three four five six'));
    const [turn] = await waitFor(() => {
      const running = p!.dispatcher.tracker.list().filter((t) => t.state === 'running');
      return running.length ? running : undefined;
    });
    const listed = JSON.parse((await send(port, { path: '/actions/turns' })).body) as Array<{ id: string }>;
    expect(listed.map((t) => t.id)).toEqual([turn!.id]);
    const stopped = await post(JSON.stringify({ id: turn!.id }));
    expect(stopped.status).toBe(200);
    expect(JSON.parse(stopped.body)).toEqual({ id: turn!.id, result: 'cancelled' });
    await waitFor(() => p!.dispatcher.snapshot().inFlight === 0);
  });

  it('a POST must be JSON from this daemon or a non-browser client, and at most 64 KiB, or it is refused before the handler runs', async () => {
    const { registry, port } = await setup();
    let ran = 0;
    registry.register(
      defineAction({
        name: 'poke',
        description: 'counts',
        input: z.object({ n: z.number().default(1) }),
        output: z.object({ ran: z.number() }),
        readOnly: false,
        handler: ({ n }) => ({ ran: (ran += n) }),
      }),
    );
    const post = (headers: Record<string, string>, body: string) => send(port, { method: 'POST', path: '/actions/poke', headers, body });
    expect((await post({ 'content-type': 'text/plain' }, '{}')).status).toBe(415);
    expect((await post({ ...json, origin: 'https://evil.example' }, '{}')).status).toBe(403);
    expect((await post(json, JSON.stringify({ n: 1, pad: 'x'.repeat(70_000) }))).status).toBe(413);
    expect(ran).toBe(0);
    expect(await post({ ...json, origin: `http://127.0.0.1:${port}` }, '{"n":2}')).toMatchObject({ status: 200, body: '{"ran":2}' });
    expect(await post(json, '')).toMatchObject({ status: 200, body: '{"ran":3}' });
  });

  it('with an admin token every request needs it (bearer or ?token=); without one, a proxied request is refused', async () => {
    const { port } = await setup('s3cret');
    expect((await send(port, { path: '/actions/version' })).status).toBe(401);
    expect((await send(port, { path: '/actions', headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    expect((await send(port, { path: '/actions/version', headers: { authorization: 'Bearer s3cret' } })).status).toBe(200);
    expect((await send(port, { path: '/actions/version?token=s3cret' })).status).toBe(200);
    await http!.close();
    await p!.close();
    const open = await setup();
    expect((await send(open.port, { path: '/actions/version', headers: { 'x-forwarded-for': '203.0.113.9' } })).status).toBe(403);
    expect((await send(open.port, { path: '/actions/version' })).status).toBe(200);
  });

  it('checkAdmin: loopback without a token, the token otherwise', () => {
    const req = (remoteAddress: string, headers: Record<string, string> = {}) => ({ headers, socket: { remoteAddress } }) as never;
    const url = new URL('http://localhost/actions');
    expect(checkAdmin(req('127.0.0.1'), url, undefined)).toBe('ok');
    expect(checkAdmin(req('192.0.2.1'), url, undefined)).toBe('forbidden');
    expect(checkAdmin(req('192.0.2.1', { authorization: 'Bearer t' }), url, 't')).toBe('ok');
    expect(checkAdmin(req('127.0.0.1'), url, 't')).toBe('unauthorized');
    expect(checkAdmin(req('127.0.0.1', { authorization: 'Bearer tt' }), new URL('http://localhost/?token=t'), 't')).toBe('unauthorized');
  });

  it('a duplicate name is refused; unregistering removes the action, its route and its slash command', async () => {
    const { registry, port } = await setup();
    const dispose = registry.register(pingAction);
    expect(() => registry.register(pingAction)).toThrow(expect.objectContaining({ code: 'ACTION_DUPLICATE' }));
    expect(JSON.parse((await send(port, { path: '/actions/ping?word=hi&token=x' })).body)).toEqual({ reply: 'hi', face: 'http' });
    expect(p!.workspace.runtime.commands.find('ping')).toBeDefined();
    dispose();
    expect(registry.get('ping')).toBeUndefined();
    expect((await send(port, { path: '/actions/ping' })).status).toBe(404);
    expect(p!.workspace.runtime.commands.find('ping')).toBeUndefined();
  });

  it('the slash face turns words into input and answers in the chat with the formatted result or the error', async () => {
    const { registry } = await setup();
    registry.register(pingAction);
    await p!.dispatcher.deliver(userMessage('t', '/ping marco'));
    await waitFor(() => p!.adapter.visible('chat-1').length === 1);
    expect(p!.adapter.visible('chat-1')).toEqual(['marco! (via slash)']);
  });

  it('an answer that does not fit the output schema is a 500, never passed on', async () => {
    const { registry, port } = await setup();
    registry.register(
      defineAction({
        name: 'liar',
        description: 'wrong output',
        input: z.object({}),
        output: z.object({ n: z.number() }),
        readOnly: true,
        handler: () => ({ n: 'seven' }) as never,
      }),
    );
    expect((await send(port, { path: '/actions/liar' })).status).toBe(500);
  });

  it('run() validates input before the handler, and exitStatus/format become the CLI header and text', async () => {
    const { registry, port } = await setup();
    let ran = false;
    const strict = defineAction({
      name: 'strict',
      description: 'needs a count',
      input: z.object({ count: z.coerce.number().int().positive() }),
      output: z.object({ count: z.number() }),
      readOnly: true,
      handler: ({ count }) => ((ran = true), { count }),
      exitStatus: (o) => (o.count > 5 ? 78 : 0),
      format: (o) => `count is ${o.count}`,
    });
    registry.register(strict);
    await expect(registry.run(strict, { count: 'many' }, { face: 'cli' })).rejects.toMatchObject({ code: 'ACTION_INPUT_INVALID' });
    expect(ran).toBe(false);
    const big = await send(port, { path: '/actions/strict?count=9', headers: { accept: 'text/plain' } });
    expect(big).toMatchObject({ status: 200, body: 'count is 9\n' });
    expect(big.headers[EXIT_STATUS_HEADER]).toBe('78');
    const small = await send(port, { path: '/actions/strict?count=2' });
    expect(small.headers[EXIT_STATUS_HEADER]).toBeUndefined();
    expect(JSON.parse(small.body)).toEqual({ count: 2 });
  });

  it('usage over the real ledger: since and until parsed, a bad since is 400', async () => {
    const { port } = await setup();
    const ledger = new SqliteUsageLedger(p!.db);
    ledger.record({
      at: Date.parse('2026-01-02T00:00:00Z'),
      agent: 'default',
      model: 'm',
      channel: 't',
      scope: 't:chat-1',
      inputTokens: 3,
      outputTokens: 4,
      reasoningTokens: 0,
      cachedTokens: 0,
      estimated: false,
      cost: 0.25,
    });
    const r = JSON.parse((await send(port, { path: '/actions/usage?since=2026-01-01&until=2026-01-03' })).body);
    expect(r).toMatchObject({ since: '2026-01-01T00:00:00.000Z', until: '2026-01-03T00:00:00.000Z', total: { turns: 1, input_tokens: 3, cost: 0.25 } });
    expect(JSON.parse((await send(port, { path: '/actions/usage?since=2026-01-03' })).body).total.turns).toBe(0);
    const bad = await send(port, { path: '/actions/usage?since=yesterday' });
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.body).error).toContain('"yesterday"');
  });
});

describe('parseSince', () => {
  const now = Date.UTC(2026, 4, 10, 15, 30);
  it('today, hours, days and ISO dates', () => {
    expect(parseSince('today', now)).toBe(Date.UTC(2026, 4, 10));
    expect(parseSince('24h', now)).toBe(now - 86_400_000);
    expect(parseSince('7d', now)).toBe(now - 7 * 86_400_000);
    expect(parseSince('2026-05-01T12:00:00Z', now)).toBe(Date.UTC(2026, 4, 1, 12));
    expect(() => parseSince('7w', now)).toThrow(expect.objectContaining({ code: 'ACTION_INPUT_INVALID' }));
  });
});

describe('table', () => {
  it('aligns columns to the widest cell and trims the line ends', () => {
    expect(
      table([
        ['A', 'LONG'],
        ['wide cell', 'x'],
        ['b', ''],
      ]),
    ).toBe('A          LONG\nwide cell  x\nb');
  });

  it('a channel row has a cell per header column; no error shows as -', () => {
    const row = channelRow({ id: 'tg', kind: 'telegram', state: 'connected', since: 's', attempts: 0, connection: 2, last_error: null });
    expect(row).toHaveLength(CHANNEL_HEADER.length);
    expect(row.at(-1)).toBe('-');
    expect(
      channelRow({
        id: 'x',
        kind: 'k',
        state: 's',
        since: '',
        attempts: 1,
        connection: 0,
        in_flight: 2,
        queued: 3,
        last_error: { code: 'E', message: 'm' },
      }).slice(-3),
    ).toEqual(['2', '3', 'E: m']);
  });
});
