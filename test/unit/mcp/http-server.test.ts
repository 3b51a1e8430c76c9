import { describe, expect, it, onTestFinished } from 'vitest';
import { mcpServerSchema } from '../../../src/config/schema.js';
import { CodedError } from '../../../src/contracts/errors.js';
import { MAX_HTTP_MESSAGE_BYTES } from '../../../src/mcp/http-bound.js';
import { McpServer } from '../../../src/mcp/server.js';
import { OLD_EXAMPLES_NO_SESSION, withHttpMcp, type HttpMcpOptions } from '../../fixtures/mcp/http-server.js';
import { quietLogger } from '../../helpers/cluster.js';
import { waitFor } from '../../helpers/daemon.js';

/** channeld's client of the fixture server, connected; stopped when the test finishes. */
async function connect(o: HttpMcpOptions = {}, keys: Record<string, unknown> = {}) {
  const fixture = await withHttpMcp(o);
  const { log, sink } = quietLogger();
  const server = new McpServer('a', mcpServerSchema.parse({ name: 'h', url: fixture.url, ...keys }), log, {});
  server.start();
  onTestFinished(() => server.stop(1000));
  await waitFor(() => server.status().state === 'connected', 10_000, 20);
  return { fixture, server, sink };
}

const call = (server: McpServer, tool: string, args: Record<string, unknown> = {}) =>
  server.call(tool, args, { signal: new AbortController().signal, timeoutMs: 10_000 });

describe('MCP over Streamable HTTP (an SDK server in the test)', () => {
  it('a session the server lost (404) is renewed: the call runs once on a new session, and so do the next', async () => {
    const { fixture, server } = await connect();
    expect((await call(server, 'echo', { x: 'one' })).content).toEqual([{ type: 'text', text: 'one' }]);
    const before = server.status().connection;

    await fixture.dropSessions(); // a restart: every session id it gave out is unknown now
    expect((await call(server, 'echo', { x: 'two' })).content).toEqual([{ type: 'text', text: 'two' }]);
    expect(fixture.notFound).toBeGreaterThanOrEqual(1);
    expect(fixture.sessions).toBe(1);
    expect((await call(server, 'echo', { x: 'three' })).content).toEqual([{ type: 'text', text: 'three' }]);
    // Each call ran once: the refused one never reached a tool.
    expect(fixture.ran).toEqual(['echo', 'echo', 'echo']);
    expect(server.status()).toMatchObject({ state: 'connected', tools: 2 });
    expect(server.status().connection).toBe(before + 1);
  });

  it('calls that meet the lost session together share one new session', async () => {
    const { fixture, server } = await connect();
    await fixture.dropSessions();
    const answers = await Promise.all(['a', 'b', 'c'].map((x) => call(server, 'echo', { x })));
    expect(answers.map((a) => a.content)).toEqual(['a', 'b', 'c'].map((x) => [{ type: 'text', text: x }]));
    expect(fixture.sessions).toBe(1);
  });

  it('tools/list_changed lists the tools again; past max_tools the server fails as at connect', async () => {
    const { fixture, server, sink } = await connect({}, { max_tools: 4 });
    fixture.addTool('one');
    fixture.addTool('two');
    await waitFor(() => server.tools.length === 4, 10_000, 20);
    expect(server.tools.map((t) => t.name)).toEqual(['echo', 'big', 'one', 'two']);
    expect(sink.entries().some((l) => l.msg === 'MCP server h changed its tools')).toBe(true);

    fixture.addTool('three');
    await waitFor(() => server.status().state === 'failed', 10_000, 20);
    expect(server.status().last_error).toMatchObject({ code: 'MCP_TOO_MANY_TOOLS' });
  });

  it('an approval list naming a tool the server does not list is warned about at connect, by name', async () => {
    const { sink } = await connect({}, { approval: ['echo', 'edit_file', 'h__big'] });
    const warned = sink.entries().filter((l) => l.level === 40 && String(l.msg).includes('approval names tools the server does not list'));
    expect(warned).toHaveLength(1);
    expect(warned[0]!.unlisted).toEqual(['edit_file', 'h__big']);
    expect(warned[0]!.msg).toContain('edit_file, h__big');
  });

  for (const json of [false, true]) {
    it(`an answer past 4 MiB (${json ? 'one JSON body' : 'a server-sent event'}) fails that call with a coded error; the session goes on`, async () => {
      const { server } = await connect({ json });
      const refused = await call(server, 'big').catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(CodedError);
      expect(refused).toMatchObject({ code: 'MCP_ANSWER_TOO_LARGE' });
      expect((refused as Error).message).toContain(`h__big: the MCP server's answer passed ${MAX_HTTP_MESSAGE_BYTES} bytes`);
      expect((await call(server, 'echo', { x: 'still here' })).content).toEqual([{ type: 'text', text: 'still here' }]);
      expect(server.status().state).toBe('connected');
    });
  }

  describe("a server that answers an unknown session with 400, as the SDKs' older examples did", () => {
    const renewals = (sink: { entries(): Array<Record<string, unknown>> }) =>
      sink.entries().filter((l) => String(l.msg).includes('no longer knows the session'));
    const refused = (server: McpServer, tool: string, args: Record<string, unknown> = {}) => call(server, tool, args).catch((err: unknown) => err);

    it('a 400 naming the session is a lost session: the call runs once on a new session, and so do the next', async () => {
      const { fixture, server, sink } = await connect({ unknownSessionAs400: OLD_EXAMPLES_NO_SESSION });
      expect((await call(server, 'echo', { x: 'one' })).content).toEqual([{ type: 'text', text: 'one' }]);
      const before = server.status().connection;

      await fixture.dropSessions(); // a restart: every session id it gave out is unknown now
      expect((await call(server, 'echo', { x: 'two' })).content).toEqual([{ type: 'text', text: 'two' }]);
      expect(fixture.badRequests).toContain('POST tools/call');
      expect(fixture.started).toBe(2);
      expect((await call(server, 'echo', { x: 'three' })).content).toEqual([{ type: 'text', text: 'three' }]);
      expect(fixture.ran).toEqual(['echo', 'echo', 'echo']);
      expect(server.status()).toMatchObject({ state: 'connected', tools: 2, connection: before + 1 });
      // The log says which refusal it was.
      expect(renewals(sink)).toMatchObject([{ level: 40, status: 400, msg: 'MCP server h no longer knows the session (HTTP 400); starting a new one' }]);
    });

    it("a 400 that does not name the session is the call's error: no new session", async () => {
      const { fixture, server, sink } = await connect({ unknownSessionAs400: 'Bad Request' });
      const before = server.status().connection;
      await fixture.dropSessions();
      const err = await refused(server, 'echo', { x: 'one' });
      expect(err).toBeInstanceOf(CodedError);
      expect(err).toMatchObject({ code: 'MCP_TOOL_FAILED' });
      expect((err as Error).message).toContain('h__echo: Streamable HTTP error: Error POSTing to endpoint: ');
      expect((err as Error).message).toContain('Bad Request');
      expect(fixture.started).toBe(1);
      expect(fixture.ran).toEqual([]);
      expect(renewals(sink)).toEqual([]);
      expect(server.status()).toMatchObject({ state: 'connected', connection: before });
    });

    it("a second 400 on the new session is the call's error: one new session per call, no loop", async () => {
      const { fixture, server, sink } = await connect({ unknownSessionAs400: OLD_EXAMPLES_NO_SESSION, forgetOnToolCall: true });
      const before = server.status().connection;
      const err = await refused(server, 'echo', { x: 'one' });
      expect(err).toMatchObject({ code: 'MCP_TOOL_FAILED' });
      expect((err as Error).message).toContain(OLD_EXAMPLES_NO_SESSION);
      expect(fixture.badRequests.filter((r) => r.startsWith('POST'))).toEqual(['POST tools/call', 'POST tools/call']);
      expect(fixture.started).toBe(2);
      expect(fixture.ran).toEqual([]);
      expect(renewals(sink)).toHaveLength(1);
      expect(server.status()).toMatchObject({ state: 'connected', connection: before + 1 });
    });

    it("the old session's server-sent event stream, refused 400 too, is tried twice more and left; the next call renews", async () => {
      const { fixture, server, sink } = await connect({ unknownSessionAs400: OLD_EXAMPLES_NO_SESSION });
      await waitFor(() => fixture.streams === 1, 10_000, 20); // the client opens it after initialize, unawaited
      await fixture.dropSessions(); // ends that stream
      // The SDK reopens it with backoff (1 s, then 1.5 s) and gives up after its two retries.
      await waitFor(() => sink.entries().some((l) => JSON.stringify(l.err ?? '').includes('Maximum reconnection attempts')), 15_000, 50);
      expect(fixture.badRequests).toEqual(['GET', 'GET']);
      expect(fixture.started).toBe(1);
      expect(server.status().state).toBe('connected');
      expect((await call(server, 'echo', { x: 'after' })).content).toEqual([{ type: 'text', text: 'after' }]);
      expect(fixture.started).toBe(2);
    });
  });
});
