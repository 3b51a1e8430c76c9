import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { APICallError } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ActionRegistry } from '../../../src/actions/registry.js';
import { defineAction } from '../../../src/actions/action.js';
import { classifyProviderError } from '../../../src/agent/provider-errors.js';
import { catalogue, CodedError, ProviderError, userMessage, userText, type ErrorCode } from '../../../src/contracts/errors.js';
import { Kernel } from '../../../src/kernel/kernel.js';
import { planStart } from '../../../src/kernel/plan.js';

/** Every .ts file under `dir`. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => join(e.parentPath, e.name));
}

const codeOf = (fn: () => unknown): string | undefined => {
  try {
    fn();
  } catch (err) {
    return (err as CodedError).code;
  }
  return undefined;
};

describe('the error catalogue', () => {
  it('every code in the catalogue is raised or emitted somewhere outside it', () => {
    // The catalogue's own file counts only below the catalogue (ConfigError raises CONFIG_INVALID).
    const read = (f: string) => (f.endsWith('contracts/errors.ts') ? readFileSync(f, 'utf8').split('export type ErrorCode')[1]! : readFileSync(f, 'utf8'));
    const code = [...sources('src'), ...sources('channels')].map(read).join('\n');
    const unused = (Object.keys(catalogue) as ErrorCode[]).filter((c) => !code.includes(`'${c}'`));
    expect(unused).toEqual([]);
  });

  it('failures that once shared a code have their own: tools, modes, actions, components', async () => {
    const { Runtime } = await import('../../../src/runtime/runtime.js');
    const rt = new Runtime({ runnerFor: () => ({ name: 'none', run: async function* () {} }) });
    const tool = { name: 't', description: '', input: z.object({}), run: () => '' };
    rt.tools.register(tool);
    expect(codeOf(() => rt.tools.register(tool))).toBe('TOOL_DUPLICATE');
    rt.modes.register({ name: 'm', description: '', setup: () => {} });
    expect(codeOf(() => rt.modes.register({ name: 'm', description: '', setup: () => {} }))).toBe('MODE_DUPLICATE');
    rt.commands.register({ name: 'c', help: '', handler: () => '' });
    expect(codeOf(() => rt.commands.register({ name: 'c', help: '', handler: () => '' }))).toBe('COMMAND_DUPLICATE');

    const actions = new ActionRegistry({} as ConstructorParameters<typeof ActionRegistry>[0]);
    const action = defineAction({ name: 'a', description: '', input: z.object({}), output: z.object({}), readOnly: true, handler: () => ({}) });
    actions.register(action);
    expect(codeOf(() => actions.register(action))).toBe('ACTION_DUPLICATE');

    expect(
      codeOf(() =>
        planStart([
          { name: 'p', start() {} },
          { name: 'p', start() {} },
        ]),
      ),
    ).toBe('KERNEL_DUPLICATE_COMPONENT');
    expect(
      codeOf(() =>
        planStart([
          { name: 'a', provides: ['db'], start() {} },
          { name: 'b', provides: ['db'], start() {} },
        ]),
      ),
    ).toBe('KERNEL_DUPLICATE_PROVIDER');
    const k = new Kernel();
    // A component that fails to start is KERNEL_START_FAILED; why is its cause.
    await expect(k.load({ name: 'sneaky', start: (ctx) => ctx.provide('db', {}) })).rejects.toMatchObject({
      code: 'KERNEL_START_FAILED',
      cause: { code: 'KERNEL_UNDECLARED_PROVIDE' },
    });
    await expect(new Kernel().load({ name: 'nosy', start: (ctx) => void ctx.use('db') })).rejects.toMatchObject({
      code: 'KERNEL_START_FAILED',
      cause: { code: 'KERNEL_UNDECLARED_USE' },
    });
  });

  it('a provider failure is a coded error of the catalogue, and the chat reads the catalogue text', () => {
    const err = classifyProviderError(
      new APICallError({ message: 'no', url: 'http://x/v1', requestBodyValues: {}, statusCode: 401, responseBody: '{"error":{"message":"bad key"}}' }),
      false,
    );
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toBeInstanceOf(CodedError);
    expect(err).toMatchObject({ code: 'PROVIDER_AUTH_FAILED', retryable: false, status: 401, providerMessage: 'bad key' });
    expect(userMessage(err)).toBe('The model provider refused our API key; the operator needs to check it.');
    expect(classifyProviderError(new Error('x'), true)).toMatchObject({ code: 'PROVIDER_TIMEOUT', retryable: true });
    // Without a `user` text the operator text is the sentence; anything uncoded reads as TURN_FAILED.
    expect(userText('PROVIDER_TIMEOUT')).toBe('The model did not answer in time.');
    expect(userMessage(new Error('boom'))).toBe(userText('TURN_FAILED'));
  });
});
