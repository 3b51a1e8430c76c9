import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FakeLlm } from '../fakes/llm/server.js';
import { startDaemon, type TestDaemon } from '../helpers/daemon.js';
import { ChatClient } from '../helpers/webchat-client.js';

describe('modes and the runtime histogram in the shipped daemon (fake LLM)', () => {
  let llm: FakeLlm;
  let d: TestDaemon | undefined;
  const clients: ChatClient[] = [];
  beforeEach(async () => {
    llm = new FakeLlm();
    await llm.start();
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    await d?.stop();
    d = undefined;
    await llm.close();
  });

  it('[agent] modes puts the brief mode in the system prompt; /mode brief takes it out; /metrics has the runtime histogram', async () => {
    d = await startDaemon(`[agent]\nprovider = "openai-compatible"\nbase_url = "${llm.url}"\nmodel = "m"\nmodes = ["brief"]\n\n[[channels]]\nid = "web"\ntype = "webchat"\n`);
    const c = new ChatClient(d.url, 'tab');
    clients.push(c);
    await c.opened;
    llm.script({ kind: 'stream', chunks: [{ content: 'Short.' }] }, { kind: 'stream', chunks: [{ content: 'Long.' }] });
    c.send('explain');
    expect((await c.finals(1, 15_000))[0]!.text).toBe('Short.');
    expect(String(llm.requests[0]!.body.messages[0]!.content)).toContain('Keep answers brief');
    c.send('/mode brief');
    expect((await c.finals(2, 15_000))[1]!.text).toBe('Mode brief is off.');
    c.send('explain');
    expect((await c.finals(3, 15_000))[2]!.text).toBe('Long.');
    expect(String(llm.requests[1]!.body.messages[0]!.content)).not.toContain('Keep answers brief');
    const metrics = await (await fetch(`${d.url}/metrics`)).text();
    expect(metrics).toMatch(/channeld_turn_runtime_seconds_count\{agent="default",outcome="done"\} 3/);
  });
});
