import { describe, expect, it } from 'vitest';
import { withChat, withDaemon, withLlm } from '../helpers/fixtures.js';
import { llmAgent, webchatChannel } from '../helpers/toml.js';

describe('modes and the runtime histogram in the shipped daemon (fake LLM)', () => {
  it('[agent] modes puts the brief mode in the system prompt; /mode brief takes it out; /metrics has the runtime histogram', async () => {
    const llm = await withLlm();
    const d = await withDaemon(llmAgent(llm.url, 'm', 'modes = ["brief"]\n') + webchatChannel());
    const c = await withChat(d, 'tab');
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
