import { afterEach, describe, expect, it } from 'vitest';
import { providers } from '../../../src/config/providers.js';
import { agentSchema } from '../../../src/config/schema.js';
import { CodedError } from '../../../src/contracts/errors.js';
import { candidatesFor } from '../../../src/workspace/workspace.js';
import { configProblems } from '../../helpers/config.js';

const web = `[[channels]]\nid = "web"\ntype = "webchat"\n`;
const agent = (lines: string) => `${web}[agent]\n${lines}`;

// The one list of providers (src/config/providers.ts) is what the schema, the load-time rules
// and the workspace read; a test-only provider shows that none of them keeps a list of its own.
describe('the provider registry', () => {
  afterEach(() => {
    const i = providers.findIndex((p) => p.name === 'test-only');
    if (i >= 0) providers.splice(i, 1);
  });

  it('keeps the config messages, with file:line:col', () => {
    expect(configProblems(agent('provider = "opnai"\n'))).toEqual(['daemon.config.toml:5:12: agent.provider: "opnai" is not one of echo, openai-compatible']);
    expect(configProblems(agent('provider = "openai-compatible"\n'))).toEqual([
      'daemon.config.toml:5:12: agent.provider: agent "default" uses openai-compatible and needs base_url',
      'daemon.config.toml:5:12: agent.provider: agent "default" uses openai-compatible and needs model',
    ]);
    expect(configProblems(agent('fallback_models = ["nope:m", "openai-compatible:m"]\n'))).toEqual([
      'daemon.config.toml:5:19: agent.fallback_models[0]: "nope" is not one of echo, openai-compatible',
      'daemon.config.toml:5:19: agent.fallback_models[1]: agent "default" needs base_url for an openai-compatible fallback',
    ]);
  });

  it('takes the schema enum, the fallback check and the per-provider rules from the registry', () => {
    expect(configProblems(agent('provider = "test-only"\n'))[0]).toContain('is not one of echo, openai-compatible');
    providers.push({ name: 'test-only', endpoint: false, requires: ['model'] });
    expect(configProblems(agent('provider = "test-only"\nmodel = "m"\nfallback_models = ["test-only:n"]\n'))).toEqual([]);
    expect(configProblems(agent('provider = "test-only"\n'))).toEqual([
      'daemon.config.toml:5:12: agent.provider: agent "default" uses test-only and needs model',
    ]);
    expect(configProblems(agent('provider = "opnai"\n'))[0]).toContain('is not one of echo, openai-compatible, test-only');
  });

  it('the workspace refuses a provider without a runner (AGENT_UNKNOWN_PROVIDER), never echoing in its place', () => {
    providers.push({ name: 'test-only', endpoint: false, requires: [] });
    const refused = (config: ReturnType<typeof agentSchema.parse>) => {
      try {
        candidatesFor(config)({ text: 'hello', history: [], systemPrompt: '' } as never);
      } catch (err) {
        return err instanceof CodedError ? err.code : err;
      }
      return 'accepted';
    };
    expect(refused(agentSchema.parse({ provider: 'test-only' }))).toBe('AGENT_UNKNOWN_PROVIDER');
    expect(refused(agentSchema.parse({ fallback_models: ['test-only:m'] }))).toBe('AGENT_UNKNOWN_PROVIDER');
    expect(refused(agentSchema.parse({ provider: 'echo', fallback_models: ['echo:m'] }))).toBe('accepted');
  });
});
