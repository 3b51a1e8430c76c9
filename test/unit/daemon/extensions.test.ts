import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { PluginDefinition } from '../../../src/contracts/plugin-folder.js';
import { Extensions } from '../../../src/daemon/extensions.js';
import { definitionProblems } from '../../../src/daemon/plugin-folders.js';
import { Runtime } from '../../../src/runtime/runtime.js';

const runtime = () =>
  new Runtime({
    runnerFor: () => {
      throw new Error('no model in these tests');
    },
  });
const all = { modes: new Set(['sea']), features: new Set<string>() };

const sea: PluginDefinition = {
  name: 'sea',
  commands: [{ name: 'ahoy', help: 'greets', handler: () => 'ahoy' }],
  tools: [{ name: 'knots', description: 'counts', input: z.object({}), run: () => 12 }],
  hooks: [{ phase: 'pre_dispatch', name: 'bell', run: () => undefined }],
  modes: [{ name: 'sea', description: 'at sea', setup: (api) => api.command({ name: 'sing', help: 'sings', handler: () => 'la' }) }],
};

describe('Extensions (the service plugin folders add to)', () => {
  it('applies a definition to runtimes attached before and after it, and takes back exactly that', () => {
    const ext = new Extensions();
    const early = runtime();
    const detachEarly = ext.attach(early, 'a');
    const remove = ext.add('./sea', sea);
    const late = runtime();
    const detachLate = ext.attach(late, 'b');
    for (const rt of [early, late]) {
      expect(rt.commands.find('ahoy')).toBeDefined();
      expect(rt.commands.find('sing', all.modes)).toBeDefined();
      expect(rt.tools.select(all).map((t) => t.name)).toContain('knots');
      expect(rt.hooks.ordered('pre_dispatch').map((h) => h.name)).toContain('bell');
      expect(rt.modes.has('sea')).toBe(true);
    }
    detachLate();
    expect(late.commands.find('ahoy')).toBeUndefined();
    expect(late.modes.has('sea')).toBe(false);
    expect(early.commands.find('ahoy')).toBeDefined();
    remove();
    expect(early.commands.find('ahoy')).toBeUndefined();
    expect(early.tools.select(all).map((t) => t.name)).not.toContain('knots');
    expect(early.hooks.ordered('pre_dispatch')).toEqual([]);
    expect(ext.names()).toEqual([]);
    detachEarly();
  });

  it('a clash adds nothing and names the plugin folder', () => {
    const ext = new Extensions();
    const rt = runtime();
    rt.commands.register({ name: 'sing', help: 'built in', handler: () => 'x' });
    ext.attach(rt, 'a');
    const clash: PluginDefinition = {
      name: 'clash',
      commands: [
        { name: 'hum', help: 'hums', handler: () => 'mm' },
        { name: 'sing', help: 'again', handler: () => 'y' },
      ],
    };
    expect(() => ext.add('./clash', clash)).toThrow(/plugin folder \.\/clash \("clash"\) cannot be added to agent "a": "\/sing" is already registered/);
    expect(rt.commands.find('hum')).toBeUndefined();
    expect(ext.names()).toEqual([]);
    // Attaching a runtime where a definition clashes fails the same way and leaves it clean.
    const ok = new Extensions();
    ok.add('./clash', clash);
    expect(() => ok.attach(rt, 'a')).toThrow(/COMMAND_DUPLICATE|already registered/);
    expect(rt.commands.find('hum')).toBeUndefined();
  });
});

describe('definitionProblems (a plugin folder default export)', () => {
  it('accepts a valid definition and names each problem of a bad one', () => {
    expect(definitionProblems(sea)).toEqual([]);
    expect(definitionProblems(undefined)[0]).toMatch(/no default export/);
    expect(definitionProblems([])).toEqual(['the default export is an array, not a plugin definition object']);
    expect(definitionProblems({ name: 'x y', hooks: [{ name: 'h', phase: 'sometime', run() {} }], modes: {} })).toEqual([
      'name must be a string of letters, digits, "_" and "-"',
      'modes must be an array, got object',
      expect.stringMatching(/^hooks\[0\] \("h"\): phase must be one of pre_dispatch, /),
    ]);
  });
});
