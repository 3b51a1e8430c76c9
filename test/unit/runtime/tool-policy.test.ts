import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Tool, ToolSelection } from '../../../src/contracts/tools.js';
import { needsApproval, notOfferedBecause } from '../../../src/runtime/tool-policy.js';
import { ToolRegistry } from '../../../src/runtime/tool-registry.js';

const tool = (name: string, extra: Partial<Tool> = {}): Tool => ({ name, description: name, input: z.object({}), run: () => 'ok', ...extra });
const sel = (extra: Partial<ToolSelection> = {}): ToolSelection => ({ modes: new Set(), features: new Set(), ...extra });

describe('tool policy: why a tool is offered or not', () => {
  it('names every reason a tool is not offered, in the order they are fixed', () => {
    const t = tool('x', { requires_modes: ['coder', 'ops'], requires_features: ['git', 'fs'], requires_sandbox: true, enabled_by_default: false });
    expect(notOfferedBecause(t, sel({ allow: ['y'], features: new Set(['fs']) }))).toEqual([
      'not in the [agent] tools allowlist',
      'disabled by default (name it in [agent] tools)',
      'mode not active (coder or ops)',
      'feature missing (git)',
      'needs a sandbox ([agent] sandbox = true)',
    ]);
    expect(notOfferedBecause(t, sel({ allow: ['x'], modes: new Set(['ops']), features: new Set(['fs', 'git']), sandbox: true }))).toEqual([]);
  });

  it('a tool off by default is offered only when the allowlist names it; a sandbox tool only with a sandbox', () => {
    const r = new ToolRegistry();
    r.register(tool('plain'));
    r.register(tool('secret', { enabled_by_default: false }));
    r.register(tool('shell', { requires_sandbox: true }));
    const names = (s: ToolSelection) => r.select(s).map((t) => t.name);
    expect(names(sel())).toEqual(['plain']);
    expect(names(sel({ sandbox: true }))).toEqual(['plain', 'shell']);
    expect(names(sel({ allow: ['secret', 'shell'] }))).toEqual(['secret']);
    expect(names(sel({ allow: ['secret', 'shell'], sandbox: true }))).toEqual(['secret', 'shell']);
    expect(r.all().map((t) => t.name)).toEqual(['plain', 'secret', 'shell']);
  });

  it("approval: the agent's tool_approval (a list, or a table either way) wins over the tool's own", () => {
    const asks = tool('stamp', { approval: 'always' });
    const quiet = tool('clock');
    expect(needsApproval({}, asks)).toBe(true);
    expect(needsApproval({}, quiet)).toBe(false);
    expect(needsApproval({ tool_approval: ['clock'] }, quiet)).toBe(true);
    expect(needsApproval({ tool_approval: ['clock'] }, asks)).toBe(true);
    expect(needsApproval({ tool_approval: { stamp: 'never' } }, asks)).toBe(false);
    expect(needsApproval({ tool_approval: { clock: 'always' } }, quiet)).toBe(true);
    // A name that only exists on Object.prototype is no entry.
    expect(needsApproval({ tool_approval: {} }, tool('constructor'))).toBe(false);
  });
});
