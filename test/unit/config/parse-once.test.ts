import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { ChannelKinds } from '../../../src/config/kinds.js';
import { parseConfig } from '../../../src/config/load.js';
import { ConfigError } from '../../../src/contracts/errors.js';
import { shippedKinds } from '../../fixtures/kinds.js';

/**
 * The config file is parsed once per start or reload, so zod's fast path (a function it
 * generates with `new Function` for an object schema on that schema's first parse) is pure
 * cost there. Counted by standing a Proxy in for the global `Function` zod constructs with.
 */
const realFunction = globalThis.Function;
let generated = 0;

function countGeneratedCode(): void {
  generated = 0;
  globalThis.Function = new Proxy(realFunction, {
    construct(target, args, newTarget) {
      generated++;
      return Reflect.construct(target, args, newTarget);
    },
  });
}

afterEach(() => {
  globalThis.Function = realFunction;
});

const shipped = readFileSync(new URL('../../../daemon.config.toml', import.meta.url), 'utf8');
const telegram = `[[channels]]
id = "tg"
type = "telegram"
token_env = "TG_TOKEN"
allow_from = ["*"]

[agents.helper]
provider = "echo"

[limits]
user_turns_per_hour = 20
`;

describe('parsing the config file', () => {
  it('generates no code: the shipped file and one with a platform channel, an agent and limits', () => {
    countGeneratedCode();
    const first = parseConfig(shipped, 'daemon.config.toml', new ChannelKinds(shippedKinds), {});
    const second = parseConfig(telegram, 'daemon.config.toml', new ChannelKinds(shippedKinds), { TG_TOKEN: `123456789:${'A'.repeat(35)}` });
    expect(first.config.channels.map((c) => c.type)).toEqual(['webchat']);
    expect(second.config.channels.map((c) => c.type)).toEqual(['telegram']);
    expect(generated).toBe(0);
  });

  it('generates no code for a file it refuses either (every stage runs on what is valid)', () => {
    countGeneratedCode();
    expect(() => parseConfig(`${telegram}\n[daemon]\nstate_dirr = "x"\n`, 'daemon.config.toml', new ChannelKinds(shippedKinds), {})).toThrow(ConfigError);
    expect(generated).toBe(0);
  });

  it('counts what zod generates when asked for its fast path (the probe can see it)', async () => {
    const { z } = await import('zod');
    countGeneratedCode();
    z.strictObject({ a: z.string(), b: z.number() }).parse({ a: 'x', b: 1 });
    expect(generated).toBeGreaterThan(0);
  });
});
