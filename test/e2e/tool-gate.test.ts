import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import type { FakeLlm } from '../fakes/llm/server.js';
import { callTool, say, toolResult } from '../helpers/approval.js';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { scaled } from '../helpers/timing.js';
import { withChat, withDaemon, withLlm, withTempDir } from '../helpers/fixtures.js';
import { llmAgent, webchatChannel } from '../helpers/toml.js';
import type { ChatClient } from '../helpers/webchat-client.js';

/** The plugin folder docs/EXTENDING.md shows: `stamp` (asks first), `hold`, `shell` (sandbox), `recipe` (off by default). */
const TOOLBOX = join(import.meta.dirname, '../fixtures/plugins/toolbox');

const toolNames = (body: { tools?: unknown[] }) => (body.tools ?? []).map((t) => (t as { function: { name: string } }).function.name).sort();

describe('every tool gated and stoppable: plugin-folder and built-in tools (fake LLM, web chat)', () => {
  let llm: FakeLlm;
  let dir: string;
  let d: TestDaemon;
  let c: ChatClient;
  beforeEach(async () => {
    llm = await withLlm();
    // The fixture reads it per call: the stamp book and the files that release `hold`.
    dir = withTempDir('toolbox');
    process.env.TOOLBOX_DIR = dir;
  });

  const start = async (agentKeys: string) => {
    d = await withDaemon(llmAgent(llm.url, 'm', agentKeys) + webchatChannel(), {}, `plugins = ["${TOOLBOX}"]`);
    c = await withChat(d, 'tab');
  };
  const finalSaying = (text: string) => waitFor(() => c.replies().find((f) => f.final && f.text?.includes(text)), 20_000);
  const stamps = () => (existsSync(join(dir, 'stamps.txt')) ? readFileSync(join(dir, 'stamps.txt'), 'utf8') : '');

  it('a plugin tool that declares approval asks in the chat and runs once approved; tool_approval gates a built-in tool and overrides a default', async () => {
    await start('tool_approval = { current_time = "always" }');
    llm.script(callTool('stamp', { doc: 'lease' }), say('Stamped.'));
    c.send('stamp the lease');
    const q = await waitFor(() => c.replies().find((f) => f.buttons), 20_000);
    expect(q.text).toContain('stamp {"doc":"lease"}');
    expect(stamps()).toBe('');
    c.send(q.buttons![0]!.data);
    await finalSaying('Stamped.');
    expect(stamps()).toBe('lease\n');
    expect(toolResult(llm, 1)).toContain('stamped lease');

    // The built-in clock, named in tool_approval, asks too; a typed /deny refuses it.
    llm.script(callTool('current_time', {}), say('No clock, then.'));
    c.send('what time is it?');
    await waitFor(() => c.replies().some((f) => f.text?.includes('current_time {}') && f.text.includes('/deny')), 20_000);
    c.send('/deny');
    await finalSaying('No clock, then.');
    expect(toolResult(llm, 3)).toContain('the user denied this tool call');
  });

  it('an approval decided after request_timeout_ms has passed still runs the tool: the model is not waited on meanwhile', async () => {
    // Stretched with the time scale: a busy machine's pause before the model's first chunk is not its silence.
    await start(`request_timeout_ms = ${scaled(1000)}`);
    llm.script(callTool('stamp', { doc: 'lease' }), say('Stamped.'));
    c.send('stamp the lease');
    const q = await waitFor(() => c.replies().find((f) => f.buttons), 20_000);
    const askedAt = Date.now();
    // The approver takes longer than the model's idle bound (a condition on the clock, polled).
    await waitFor(() => Date.now() - askedAt > scaled(1500), scaled(10_000), 50);
    expect(c.replies().some((f) => f.text?.includes('cancelled') || f.text?.includes('did not answer in time'))).toBe(false);
    c.send(q.buttons![0]!.data);
    await finalSaying('Stamped.');
    expect(stamps()).toBe('lease\n');
    expect(toolResult(llm, 1)).toContain('stamped lease');
  });

  it('the agent\'s tool_approval wins over the tool\'s own approval: "never" runs it without asking', async () => {
    await start('tool_approval = { stamp = "never" }');
    llm.script(callTool('stamp', { doc: 'deed' }), say('Done.'));
    c.send('stamp the deed');
    await finalSaying('Done.');
    expect(stamps()).toBe('deed\n');
    expect(c.replies().some((f) => f.buttons)).toBe(false);
  });

  it('/stop tool cancels a running plugin tool call; the answer goes on with "cancelled by the user"', async () => {
    await start('');
    llm.script(callTool('hold', { until: 'never' }), say('Went on without it.'));
    c.send('hold on');
    await waitFor(() => c.replies().some((f) => f.text?.includes('⏳ hold…')), 20_000);
    c.send('/stop tool');
    await waitFor(() => c.replies().some((f) => f.text === 'Cancelled the running tool call; the answer goes on.'), 10_000);
    await finalSaying('Went on without it.');
    expect(toolResult(llm, 1)).toContain('cancelled by the user');
  });

  it('/tools lists what the model is offered and why the others are not; the request offers exactly those', async () => {
    await start('tools = ["current_time", "recipe", "shell", "stamp"]\ntool_approval = ["current_time"]');
    c.send('/tools');
    const listing = (await finalSaying('Tools offered here')).text!;
    expect(listing).toBe(
      [
        'Tools offered here:',
        '• current_time (needs approval)',
        '• recipe',
        '• stamp (needs approval)',
        '',
        'Not offered:',
        '• hold: not in the [agent] tools allowlist',
        // The reminders' built-in tool, registered for every agent.
        '• schedule_message: not in the [agent] tools allowlist',
        '• shell: needs a sandbox ([agent] sandbox = true)',
      ].join('\n'),
    );
    llm.script(say('Hello.'));
    c.send('hi');
    await finalSaying('Hello.');
    expect(toolNames(llm.requests[0]!.body)).toEqual(['current_time', 'recipe', 'stamp']);
  });

  it('with a sandbox and no allowlist: the sandbox tool is offered, the off-by-default one is not', async () => {
    await start('sandbox = true');
    c.send('/tools');
    const listing = (await finalSaying('Tools offered here')).text!;
    expect(listing).toContain('• shell\n');
    expect(listing).toContain('• recipe: disabled by default (name it in [agent] tools)');
    expect(listing).toContain('• stamp (needs approval)');
  });

  it('a call past background_after_ms goes on in the background: the turn ends, and its result comes as one follow-up turn', async () => {
    await start('background_after_ms = 200');
    llm.script(callTool('hold', { until: 'released' }), say('I started it.'), say('The hold is over.'));
    c.send('hold on');
    const first = await finalSaying('I started it.');
    expect(first.text).toContain('⏳ hold is running in the background; its result will follow.');
    expect(toolResult(llm, 1)).toContain('running in the background');
    expect(d.daemon.tracker.list()).toHaveLength(0);

    writeFileSync(join(dir, 'released'), '');
    await finalSaying('The hold is over.');
    const followUp = llm.requests[2]!.body.messages.filter((m) => m.role === 'user').at(-1)!;
    expect(followUp.content).toContain('[Background tool call finished] hold returned:\nreleased by released');
    // One follow-up: the inbox took it once, and nothing else asks the model.
    await waitFor(() => d.daemon.tracker.list().length === 0, 10_000);
    expect(llm.requests).toHaveLength(3);
  });

  it('/stop tool cancels a call in the background: no follow-up turn', async () => {
    await start('background_after_ms = 200');
    llm.script(callTool('hold', { until: 'never' }), say('I started it.'));
    c.send('hold on');
    await finalSaying('I started it.');
    c.send('/stop tool');
    await waitFor(() => c.replies().some((f) => f.text === 'Cancelled the running tool call; the answer goes on.'), 10_000);
    await waitFor(() => d.logs.entries().some((l) => l.msg === 'background tool call cancelled; no follow-up'), 10_000);
    expect(llm.requests).toHaveLength(2);
  });
});
