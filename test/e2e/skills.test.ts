import { cpSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import type { FakeLlm } from '../fakes/llm/server.js';
import { callTool, say } from '../helpers/approval.js';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChat, withDaemon, withLlm, withTempDir } from '../helpers/fixtures.js';
import { llmAgent, webchatChannel } from '../helpers/toml.js';
import type { ChatClient } from '../helpers/webchat-client.js';

const fixtures = join(import.meta.dirname, '../fixtures');
const almanac = join(fixtures, 'plugins/almanac');

/** Skills (skills_dir, load_skill, requires_skills) in a real daemon with the fake model. */
describe('skills: the list, load_skill, tools that wait for a skill, reload', () => {
  let llm: FakeLlm;
  let d: TestDaemon;
  let c: ChatClient;
  let skills: string;

  beforeEach(async () => {
    llm = await withLlm();
    skills = withTempDir('skills');
    cpSync(join(fixtures, 'skills/tides'), join(skills, 'tides'), { recursive: true });
    // A skill whose name is not its folder's: warned about with its line, the others load.
    mkdirSync(join(skills, 'knots'));
    writeFileSync(join(skills, 'knots/SKILL.md'), '---\nname: knot\ndescription: Ties knots.\n---\nTie a bowline.\n');
    d = await withDaemon(llmAgent(llm.url, 'm', `skills_dir = "${skills}"`) + webchatChannel(), {}, `plugins = ["${almanac}"]`);
    c = await withChat(d, 'tab');
  });

  const ask = async (text: string): Promise<string> => {
    const before = c.replies().filter((f) => f.final).length;
    c.send(text);
    return (await c.finals(before + 1, 20_000))[before]!.text!;
  };
  /** What the model was told the newest tool call returned, in request `n`. */
  const toolResult = (_llm: FakeLlm, n: number) => {
    const content = llm.requests[n]!.body.messages.filter((m) => m.role === 'tool').at(-1)?.content;
    return typeof content === 'string' ? content : JSON.stringify(content);
  };
  const system = (n: number) => String(llm.requests[n]!.body.messages.find((m) => m.role === 'system')?.content);
  const tools = (n: number) => ((llm.requests[n]!.body.tools ?? []) as Array<{ function: { name: string } }>).map((t) => t.function.name);

  it('lists skills in the prompt; load_skill returns the instructions; tide_table is offered from the step after the load, for that turn only', async () => {
    llm.script(callTool('load_skill', { name: 'tides' }), callTool('tide_table', { harbour: 'Brest' }, 'call_2'), say('High water in Brest is at 06:12.'));
    expect(await ask('when is high water in Brest?')).toBe('High water in Brest is at 06:12.');
    expect(system(0)).toContain('- tides: Reads tide tables for harbours.');
    expect(tools(0)).toContain('load_skill');
    expect(tools(0)).not.toContain('tide_table');
    expect(toolResult(llm, 1)).toContain('# Skill: tides');
    expect(toolResult(llm, 1)).toContain('Call `tide_table` with the harbour');
    expect(toolResult(llm, 1)).toContain('(This skill expects the tools: tide_table.)');
    expect(tools(1)).toContain('tide_table');
    expect(toolResult(llm, 2)).toContain('Brest: high water 06:12');

    // "Loaded" lasts a turn: the instructions are not in the next turn's history, nor is the tool.
    llm.script(say('Hello again.'));
    expect(await ask('hi')).toBe('Hello again.');
    expect(tools(3)).not.toContain('tide_table');
    expect(tools(3)).toContain('load_skill');
  });

  it("reads a file of the skill's folder, never one outside it", async () => {
    llm.script(
      callTool('load_skill', { name: 'tides', file: 'references/ports.md' }),
      callTool('load_skill', { name: 'tides', file: '../../../../etc/passwd' }, 'call_2'),
      callTool('load_skill', { name: 'tides', file: 'references/nope.md' }, 'call_3'),
      callTool('load_skill', { name: 'weather' }, 'call_4'),
      say('Done.'),
    );
    expect(await ask('which ports?')).toBe('Done.');
    expect(toolResult(llm, 1)).toContain('Known harbours: Brest, Falmouth, St Malo.');
    expect(toolResult(llm, 2)).toContain('is outside the folder of skill \\"tides\\"');
    expect(toolResult(llm, 3)).toContain('skill \\"tides\\" has no file');
    expect(toolResult(llm, 4)).toContain('there is no skill \\"weather\\"; the skills are: tides');
  });

  it('an invalid SKILL.md is a warning naming its file and line; a reload (SIGHUP) reads skills_dir again', async () => {
    const warning = d.logs.entries().find((e) => String(e.msg).includes('knots/SKILL.md:2:'));
    expect(warning).toMatchObject({ level: 40, code: 'SKILL_INVALID', line: 2 });
    expect(String(warning!.msg)).toContain('"name" is "knot" but the folder is "knots"');

    llm.script(say('one'));
    await ask('first');
    expect(system(0)).not.toContain('knot');

    // Fixed, and a new skill added: the config is unchanged, the reload reads the folder again.
    writeFileSync(join(skills, 'knots/SKILL.md'), '---\nname: knots\ndescription: Ties knots.\n---\nTie a bowline.\n');
    mkdirSync(join(skills, 'charts'));
    writeFileSync(join(skills, 'charts/SKILL.md'), '---\nname: charts\ndescription: Reads sea charts.\n---\nLook at the chart.\n');
    expect(await d.daemon.reload()).toMatchObject({ ok: true, agents: [] });
    llm.script(say('two'));
    await ask('second');
    expect(system(1)).toContain('- charts: Reads sea charts.');
    expect(system(1)).toContain('- knots: Ties knots.');
    await waitFor(() => d.logs.entries().filter((e) => e.code === 'SKILL_INVALID').length === 1);
  });
});
