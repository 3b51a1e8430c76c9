import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { McpServerStatus } from '../../src/mcp/server.js';
import { callTool, say, toolResult } from '../helpers/approval.js';
import { waitFor } from '../helpers/daemon.js';
import { withChat, withLlm, withTempDir } from '../helpers/fixtures.js';
import { stdioServer } from '../helpers/mcp.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { llmAgent, webchatChannel } from '../helpers/toml.js';

const BAD = resolve('test/fixtures/mcp/bad-server.mjs');

/** The peak resident set of a process, from /proc (Linux). */
function peakRssMb(pid: number): number {
  const kb = Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
  return kb / 1024;
}

describe('bad MCP servers (real SDK servers, the daemon as a real process)', () => {
  it('endless pagination and 20,000 tools end in `failed` with a coded reason; a progress flood is coalesced; RSS stays under 300 MB', async () => {
    const llm = await withLlm();
    const dir = withTempDir('mcp-bad');
    const config = writeProcessConfig(
      dir,
      llmAgent(llm.url, 'm', 'max_tool_result_chars = 60\n') +
        stdioServer('endless', BAD, ['endless']) +
        stdioServer('many', BAD, ['many']) +
        stdioServer('flood', BAD, ['flood'], 'timeout_ms = 60000') +
        webchatChannel(),
    );
    const p = withDaemonProcess(config);
    const url = await p.url();
    const status = async () => ((await (await fetch(`${url}/status`)).json()) as { mcp_servers: McpServerStatus[] }).mcp_servers;

    // Both fail on their first attempt, well within the 30 s connect timeout, and stay failed (no retry loop).
    const failed = await waitFor(
      async () => {
        const s = await status();
        const bad = s.filter((x) => x.name !== 'flood' && x.state === 'failed');
        return bad.length === 2 && s.find((x) => x.name === 'flood')?.state === 'connected' ? s : undefined;
      },
      30_000,
      50,
    );
    expect(failed.find((s) => s.name === 'endless')).toMatchObject({ tools: 0, last_error: { code: 'MCP_TOO_MANY_PAGES' } });
    expect(failed.find((s) => s.name === 'many')).toMatchObject({ tools: 0, last_error: { code: 'MCP_TOO_MANY_TOOLS' } });
    expect(failed.find((s) => s.name === 'many')!.last_error!.message).toContain('max_tools = 128');

    // The model is offered the flood server's tool only; the flood of progress reaches the chat coalesced.
    llm.script(callTool('flood__flood', {}), say('Flood survived.'));
    const c = await withChat({ url }, 'tab0');
    c.send('flood me');
    expect((await c.finals(1, 60_000))[0]!.text).toBe('Flood survived.');
    expect(toolResult(llm, 1)).toContain('flooded');
    const offered = (llm.requests[0]!.body.tools as Array<{ function: { name: string; description: string } }>).map((t) => t.function);
    expect(offered.map((t) => t.name).filter((n) => n.includes('__'))).toEqual(['flood__flood']);
    expect(offered.find((t) => t.name === 'flood__flood')!.description.length).toBeLessThan(200);
    // Each progress line in the draft is cut (500-character messages), and there are few of them.
    const progress = c.replies().filter((r) => r.text?.includes('flood__flood'));
    expect(progress.every((r) => r.text!.length < 600)).toBe(true);

    // The model's unknown-tool error (which names every offered tool) passes max_tool_result_chars too.
    llm.script(callTool('no_such_tool', {}, 'call_2'), say('No such tool.'));
    c.send('call a missing tool');
    expect((await c.finals(2, 20_000)).at(-1)!.text).toBe('No such tool.');
    expect(toolResult(llm, 3)).toContain('[result cut');
    expect(toolResult(llm, 3)).not.toContain('flood__flood');

    expect(peakRssMb(p.child.pid!)).toBeLessThan(300);
    expect((await status()).find((s) => s.name === 'endless')!.attempts).toBe(1);
    p.signal('SIGTERM');
    expect(await p.exited).toBe(0);
  });
});
