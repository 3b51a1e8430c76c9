import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Extensions, type PluginFailure } from '../../../src/daemon/extensions.js';
import { Runtime } from '../../../src/runtime/runtime.js';

describe("Extensions report a plugin's throwing tool with where it came from", () => {
  it('a tool that throws is reported (kind tool) and its error still reaches the caller', async () => {
    const failures: PluginFailure[] = [];
    const ext = new Extensions((f) => failures.push(f));
    const rt = new Runtime({
      runnerFor: () => {
        throw new Error('no model');
      },
    });
    const detach = ext.attach(rt, 'agent-a');
    const remove = ext.add('./faulty', {
      name: 'faulty',
      tools: [
        {
          name: 'breaks',
          description: 'throws',
          input: z.object({}),
          run: () => {
            throw new Error('tool broke');
          },
        },
      ],
    });
    const tool = rt.tools.select({ modes: new Set(), features: new Set() }).find((t) => t.name === 'breaks')!;
    await expect(Promise.resolve().then(() => tool.run({}, {} as never))).rejects.toThrow('tool broke');
    expect(failures).toEqual([
      expect.objectContaining({ plugin: 'faulty', source: './faulty', kind: 'tool', name: 'breaks', phase: 'tool', agent: 'agent-a' }),
    ]);
    remove();
    detach();
  });
});
