import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { formatStatus } from '../../src/actions/builtin/status.js';
import type { McpServerStatus } from '../../src/mcp/server.js';
import type { FakeLlm } from '../fakes/llm/server.js';
import { callTool, say, toolResult } from '../helpers/approval.js';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChat, withDaemon, withLlm, withTempDir } from '../helpers/fixtures.js';
import { EVERYTHING_BIN, FILESYSTEM_BIN, stdioServer, withEverythingHttp } from '../helpers/mcp.js';
import { scaled } from '../helpers/timing.js';
import { llmAgent, webchatChannel } from '../helpers/toml.js';
import type { ChatClient } from '../helpers/webchat-client.js';

async function mcpStatus(d: TestDaemon): Promise<McpServerStatus[]> {
  const res = await fetch(`${d.url}/status`);
  return ((await res.json()) as { mcp_servers: McpServerStatus[] }).mcp_servers;
}

describe('MCP tools (reference servers over stdio and Streamable HTTP, fake LLM)', () => {
  let llm: FakeLlm;
  let d: TestDaemon | undefined;
  let files: string;
  let tabs = 0;
  beforeEach(async () => {
    tabs = 0;
    llm = await withLlm();
    files = withTempDir('mcp-files');
    writeFileSync(join(files, 'note.txt'), 'the secret word is ostrich');
  });

  const agent = (extra = '') => llmAgent(llm.url, 'm', `max_tool_result_chars = 300\n${extra}`);
  // Past the long-running tool's first 1 s progress step by a margin a busy machine (a late
  // child timer) cannot eat, and short of its second step on a developer's machine.
  const toolTimeoutMs = 1000 + scaled(500);
  const everything = (extra = '') => stdioServer('everything', EVERYTHING_BIN, ['stdio'], `timeout_ms = ${toolTimeoutMs}\n${extra}`);
  const fs = (extraDir?: string) => stdioServer('fs', FILESYSTEM_BIN, extraDir ? [files, extraDir] : [files], 'tools = ["read_text_file", "list_directory"]');
  const web = webchatChannel();

  const chat = (): Promise<ChatClient> => withChat(d!, `tab${tabs++}`);
  const connected = (d: TestDaemon, names: string[]): Promise<McpServerStatus[]> =>
    waitFor(
      async () => {
        const s = await mcpStatus(d);
        return names.every((n) => s.find((x) => x.name === n)?.state === 'connected') ? s : undefined;
      },
      30_000,
      50,
    );

  it('offers server__tool with its schema; results from stdio and Streamable HTTP servers reach the model and the answer', async () => {
    const http = await withEverythingHttp();
    d = await withDaemon(`${agent() + everything() + fs()}[[agent.mcp]]\nname = "remote"\nurl = "${http.url}"\ntools = ["get-sum"]\n${web}`);
    const st = await connected(d, ['everything', 'fs', 'remote']);
    expect(st.find((s) => s.name === 'fs')).toMatchObject({ transport: 'stdio', tools: 2 });
    expect(st.find((s) => s.name === 'remote')).toMatchObject({ transport: 'http', tools: 1 });
    // `channeld status` prints them too (the operator page reads the same status action).
    expect(formatStatus(d.daemon.status())).toContain('mcp default/fs (stdio): connected, 2 tools');

    llm.script(callTool('everything__echo', { message: 'hello from the test' }), say('The server echoed.'));
    const c = await chat();
    c.send('echo something');
    expect((await c.finals(1, 20_000))[0]!.text).toBe('The server echoed.');
    const offered = (llm.requests[0]!.body.tools as Array<{ function: { name: string; parameters: { properties: object } } }>).map((t) => t.function);
    expect(offered.map((t) => t.name)).toEqual(
      expect.arrayContaining(['current_time', 'everything__echo', 'fs__read_text_file', 'fs__list_directory', 'remote__get-sum']),
    );
    expect(offered.map((t) => t.name)).not.toContain('fs__write_file');
    expect(offered.find((t) => t.name === 'everything__echo')!.parameters.properties).toHaveProperty('message');
    expect(toolResult(llm, 1)).toContain('Echo: hello from the test');

    llm.script(callTool('fs__read_text_file', { path: join(files, 'note.txt') }, 'call_2'), say('It is ostrich.'));
    c.send('read the note');
    expect((await c.finals(2, 20_000)).at(-1)!.text).toBe('It is ostrich.');
    expect(toolResult(llm, 3)).toContain('the secret word is ostrich');

    llm.script(callTool('remote__get-sum', { a: 19, b: 23 }, 'call_3'), say('Forty-two.'));
    c.send('add them');
    expect((await c.finals(3, 20_000)).at(-1)!.text).toBe('Forty-two.');
    expect(toolResult(llm, 5)).toContain('42');
  });

  it('cuts a result over max_tool_result_chars with a note; a hung tool times out with its progress in the draft; errors reach the model', async () => {
    d = await withDaemon(agent() + everything() + web);
    await connected(d, ['everything']);
    const c = await chat();
    llm.script(callTool('everything__echo', { message: 'x'.repeat(1000) }), say('Long.'));
    c.send('long');
    await c.finals(1, 20_000);
    const cut = toolResult(llm, 1);
    expect(cut).toContain('[result cut: the tool returned 1006 characters; only the first 300 are shown]');
    expect(cut.length).toBeLessThan(500);

    // 1 s steps, timeout_ms = toolTimeoutMs: a progress notification arrives, then the timeout.
    llm.script(callTool('everything__trigger-long-running-operation', { duration: 30, steps: 30 }, 'call_2'), say('It timed out.'));
    c.send('run long');
    expect((await c.finals(2, 20_000)).at(-1)!.text).toBe('It timed out.');
    expect(toolResult(llm, 3)).toContain(`did not answer within ${toolTimeoutMs} ms`);
    expect(c.replies().some((f) => f.text?.includes('⏳ everything__trigger-long-running-operation… 1/30'))).toBe(true);

    // A tool the server reports as failed, and a tool that does not exist: tool errors.
    llm.script(callTool('everything__get-sum', { a: 'not a number' }, 'call_3'), say('Bad input.'));
    c.send('bad');
    expect((await c.finals(3, 20_000)).at(-1)!.text).toBe('Bad input.');
    expect(toolResult(llm, 5)).toMatch(/error/i);
  });

  it('a killed server is down in /status, restarts with backoff, and its tools work again; a server that cannot start leaves the agent running', async () => {
    d = await withDaemon(`${agent() + everything()}[[agent.mcp]]\nname = "broken"\ncommand = "/nonexistent/mcp-server"\n${web}`);
    const before = (await connected(d, ['everything'])).find((s) => s.name === 'everything')!;
    expect(before.pid).toBeGreaterThan(0);
    const broken = await waitFor(async () => (await mcpStatus(d!)).find((s) => s.name === 'broken' && s.last_error), 20_000, 50);
    expect(broken.state).not.toBe('connected');
    expect(broken.last_error!.message).toContain('broken');
    // A chat user's /status names the agent's tool servers and whether they work.
    const user = await chat();
    user.send('/status');
    expect((await user.finals(1, 20_000))[0]!.text).toMatch(/\nTool servers: everything \(connected, \d+ tools\), broken \((?!connected)[a-z]+, 0 tools\)/);

    process.kill(before.pid!, 'SIGKILL');
    // Seen down in /status, then back on a new connection with a new process.
    await waitFor(async () => (await mcpStatus(d!)).find((s) => s.name === 'everything')!.state !== 'connected', 20_000, 5);
    const after = await waitFor(
      async () => (await mcpStatus(d!)).find((s) => s.name === 'everything' && s.state === 'connected' && s.connection === 2),
      30_000,
      50,
    );
    expect(after.pid).not.toBe(before.pid);
    expect(d.logs.text).toContain('closed the connection');

    llm.script(callTool('everything__echo', { message: 'back' }), say('Back.'));
    const c = await chat();
    c.send('again');
    expect((await c.finals(1, 20_000))[0]!.text).toBe('Back.');
    expect(toolResult(llm, 1)).toContain('Echo: back');
  });

  it('a reload that changes one server restarts only that one; removing them stops them', async () => {
    const other = withTempDir('mcp-other');
    d = await withDaemon(agent() + everything() + fs() + web);
    const first = await connected(d, ['everything', 'fs']);
    d.rewrite(agent() + everything() + fs(other) + web);
    const result = await d.daemon.reload();
    expect(result).toMatchObject({ ok: true, agents: ['default'] });
    const second = await connected(d, ['everything', 'fs']);
    const by = (l: McpServerStatus[], n: string) => l.find((s) => s.name === n)!;
    expect(by(second, 'everything')).toMatchObject({ pid: by(first, 'everything').pid, since: by(first, 'everything').since, connection: 1 });
    expect(by(second, 'fs').pid).not.toBe(by(first, 'fs').pid);
    const fsPid = by(second, 'fs').pid!;

    d.rewrite(agent() + web);
    await d.daemon.reload();
    expect(await mcpStatus(d)).toEqual([]);
    await waitFor(
      () => {
        try {
          process.kill(fsPid, 0);
          return false;
        } catch {
          return true;
        }
      },
      10_000,
      20,
    );
  });
});
