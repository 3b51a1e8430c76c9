import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { STOP_MARKER } from '../../src/stream/reply-stream.js';
import type { FakeLlm } from '../fakes/llm/server.js';
import { callTool, say, toolResult } from '../helpers/approval.js';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChat, withDaemon, withLlm, withTempDir } from '../helpers/fixtures.js';
import { EVERYTHING_BIN, firstMcpConnected, stdioServer } from '../helpers/mcp.js';
import { llmAgent, webchatChannel } from '../helpers/toml.js';
import type { ChatClient } from '../helpers/webchat-client.js';

const WIRETAP = resolve('test/fixtures/mcp/wiretap.mjs');

describe('/stop tool and /stop during an MCP call (real server-everything)', () => {
  let llm: FakeLlm;
  let d: TestDaemon | undefined;
  let c: ChatClient | undefined;
  let wire = '';
  beforeEach(async () => {
    llm = await withLlm();
    wire = join(withTempDir('wire'), 'client-to-server.jsonl');
    // server-everything behind a tap that records what the client sends it.
    d = await withDaemon(llmAgent(llm.url) + stdioServer('everything', WIRETAP, [wire, EVERYTHING_BIN, 'stdio']) + webchatChannel());
    await firstMcpConnected(d);
    c = await withChat(d, 'tab');
  });

  /** The MCP messages the client sent the server. */
  const sent = () =>
    readFileSync(wire, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { id?: number; method?: string; params?: { name?: string; requestId?: number; reason?: string } });
  /** The tools/call request and the cancellation that names it. */
  const cancelled = () => {
    const call = sent().find((m) => m.method === 'tools/call' && m.params?.name === 'trigger-long-running-operation');
    return call && sent().find((m) => m.method === 'notifications/cancelled' && m.params?.requestId === call.id);
  };

  // 60 one-second steps: far longer than any wait below, so only a cancel ends it early.
  const longCall = () => callTool('everything__trigger-long-running-operation', { duration: 60, steps: 60 });
  const running = () => waitFor(() => c!.replies().some((f) => f.text?.includes('⏳ everything__trigger-long-running-operation… 1/60')), 20_000);

  it('/stop tool cancels only the running call; the model goes on with "cancelled by the user"', async () => {
    llm.script(longCall(), say('Went on without it.'));
    c!.send('run the long thing');
    await running();
    c!.send('/stop tool');
    await waitFor(() => c!.replies().some((f) => f.text === 'Cancelled the running tool call; the answer goes on.'), 10_000);
    await waitFor(() => c!.replies().some((f) => f.final && f.text === 'Went on without it.'), 20_000);
    expect(toolResult(llm, 1)).toContain('cancelled by the user');
    // The MCP request itself was cancelled with the protocol's notification.
    expect(await waitFor(() => cancelled(), 10_000)).toBeTruthy();
    expect(d!.daemon.mcp.status()[0]).toMatchObject({ state: 'connected', connection: 1 });

    // With nothing running, /stop tool says so and stops nothing.
    c!.send('/stop tool');
    await waitFor(() => c!.replies().some((f) => f.text === 'No tool call is running here.'), 10_000);
  });

  it('/stop during a tool call cancels the call and ends the turn', async () => {
    llm.script(longCall(), say('This is never asked for.'));
    c!.send('run the long thing');
    await running();
    c!.send('/stop');
    const stopped = await waitFor(() => c!.replies().find((f) => f.final && f.text?.endsWith(STOP_MARKER)), 20_000);
    expect(stopped.text).not.toContain('never');
    await waitFor(() => d!.daemon.tracker.list().length === 0, 10_000);
    expect(llm.requests).toHaveLength(1);
    expect(await waitFor(() => cancelled(), 10_000)).toBeTruthy();
    // The server was not restarted: the call was cancelled, not the connection.
    expect(d!.daemon.mcp.status()[0]).toMatchObject({ state: 'connected', connection: 1 });
  });
});
