import { describe, expect, it } from 'vitest';
import type { FakeLlm } from '../fakes/llm/server.js';
import { withHttpMcp, type HttpMcp } from '../fixtures/mcp/http-server.js';
import { callTool, say, toolResult } from '../helpers/approval.js';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChat, withDaemon, withLlm } from '../helpers/fixtures.js';
import { firstMcpConnected } from '../helpers/mcp.js';
import { llmAgent, webchatChannel } from '../helpers/toml.js';
import type { ChatClient } from '../helpers/webchat-client.js';

/** The function names the model was offered in request `n`. */
const offered = (llm: FakeLlm, n: number): string[] => (llm.requests[n]!.body.tools ?? []).map((t) => (t as { function: { name: string } }).function.name);

describe('an MCP server over Streamable HTTP (an SDK server in the test, fake LLM, web chat)', () => {
  const start = async (mcp: HttpMcp, extra = ''): Promise<{ llm: FakeLlm; d: TestDaemon; c: ChatClient }> => {
    const llm = await withLlm();
    const d = await withDaemon(`${llmAgent(llm.url)}[[agent.mcp]]\nname = "h"\nurl = "${mcp.url}"\n${extra}\n${webchatChannel()}`);
    await firstMcpConnected(d);
    return { llm, d, c: await withChat(d, 'tab') };
  };

  it('a tool the server adds after connecting (notifications/tools/list_changed) is offered on the next turn; one it removes is not', async () => {
    const mcp = await withHttpMcp();
    const { llm, d, c } = await start(mcp);
    llm.script(say('One.'));
    c.send('hi');
    await c.finals(1, 20_000);
    expect(offered(llm, 0)).toEqual(expect.arrayContaining(['h__echo', 'h__big']));
    expect(offered(llm, 0)).not.toContain('h__late');

    mcp.addTool('late');
    await waitFor(() => d.daemon.mcp.status()[0]!.tools === 3, 10_000, 20);
    llm.script(callTool('h__late', {}), say('Late, and answered.'));
    c.send('again');
    expect((await c.finals(2, 20_000)).at(-1)!.text).toBe('Late, and answered.');
    expect(offered(llm, 1)).toContain('h__late');
    expect(toolResult(llm, 2)).toContain('late');
    expect(mcp.ran).toEqual(['late']);

    mcp.removeTool('late');
    await waitFor(() => d.daemon.mcp.status()[0]!.tools === 2, 10_000, 20);
    llm.script(say('Three.'));
    c.send('once more');
    await c.finals(3, 20_000);
    expect(offered(llm, 3)).not.toContain('h__late');
    expect(offered(llm, 3)).toContain('h__echo');
  });

  it('tool names a model API refuses (a dot, 70 characters) are offered under valid names, and calling those reaches the right tool', async () => {
    const long = `report_${'q'.repeat(56)}_final`; // 70 characters: with "h__", past 64
    const mcp = await withHttpMcp({ tools: ['files.read', 'files_read', long] });
    const { llm, d, c } = await start(mcp);
    llm.script(say('Listed.'));
    c.send('hi');
    await c.finals(1, 20_000);
    const names = offered(llm, 0);
    for (const name of names) expect(name).toMatch(/^[a-zA-Z0-9_-]{1,64}$/);
    expect(new Set(names).size).toBe(names.length);
    // The valid name keeps its own; the dotted one, which would clash with it, and the long one end in a hash.
    expect(names).toContain('h__files_read');
    const dotted = names.find((n) => /^h__files_read_[0-9a-f]{8}$/.test(n))!;
    const shortened = names.find((n) => n.startsWith('h__report_qqq'))!;
    expect(shortened).toMatch(/^h__report_q+_[0-9a-f]{8}$/);
    expect(shortened).toHaveLength(64);
    // The operator can tell which is which.
    const renamed = d.logs.entries().find((l) => typeof l.msg === 'string' && l.msg.includes('offered under other names'));
    expect(renamed?.renamed).toEqual({ 'files.read': dotted, [long]: shortened });

    llm.script(callTool(dotted, {}), callTool(shortened, {}, 'call_2'), callTool('h__files_read', {}, 'call_3'), say('All three.'));
    c.send('call them');
    expect((await c.finals(2, 20_000)).at(-1)!.text).toBe('All three.');
    expect(mcp.ran).toEqual(['files.read', long, 'files_read']);
    expect(toolResult(llm, 2)).toBe('files.read');
  });
});
