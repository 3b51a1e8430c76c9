import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ChannelKinds } from '../../../src/config/kinds.js';
import { parseConfig } from '../../../src/config/load.js';
import { defineChannel, type ChannelDescriptor } from '../../../src/contracts/channel.js';
import { CodedError, ConfigError } from '../../../src/contracts/errors.js';
import { kindsWithFixture, shippedKinds } from '../../fixtures/kinds.js';

const withPostbox = new ChannelKinds(kindsWithFixture);
const builtin = new ChannelKinds(shippedKinds);
/** The shipped kinds as "is not one of" lists them: derived from the registry, so a new kind needs no edit here. */
const shipped = shippedKinds.map((k) => k.kind).join(', ');

function problems(source: string, kinds: ChannelKinds, env: NodeJS.ProcessEnv = {}): string[] {
  try {
    parseConfig(source, '/etc/channeld/daemon.config.toml', kinds, env);
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
  return [];
}

const loop = (keys = '') => `[[channels]]\nid = "lb"\ntype = "postbox"\nallow_from = ["*"]\nkey_env = "LB_KEY"\n${keys}`;

describe('a channel kind added by one registry line (test/fixtures/channels/postbox)', () => {
  it('parses with its own keys, their defaults and its secret', () => {
    const { config, secrets } = parseConfig(loop('path = "/lb"\n'), 'daemon.config.toml', withPostbox, { LB_KEY: 'k-123456' });
    expect(config.channels[0]).toMatchObject({ id: 'lb', type: 'postbox', path: '/lb', max_message_length: 4000, require_mention: true });
    expect(secrets.get('channels.lb', 'key')).toBe('k-123456');
  });

  it('reports its bad keys with file:line:col, a "did you mean" from its own keys, and its missing secret', () => {
    const src = `[[channels]]\nid = "lb"\ntype = "postbox"\nallow_from = ["*"]\npath = "no-slash"\nmax_mesage_length = 100\n`;
    expect(problems(src, withPostbox)).toEqual([
      'daemon.config.toml:1:1: channels[0]: channel "lb" needs key_env, or key_file, or key_credential',
      expect.stringMatching(/^daemon\.config\.toml:5:8: channels\[0\]\.path: write an absolute path without a trailing "\/"/),
      'daemon.config.toml:6:1: channels[0].max_mesage_length: unknown key "max_mesage_length"; did you mean `max_message_length`?',
    ]);
    expect(problems(loop('max_message_length = 2\n'), withPostbox, { LB_KEY: 'k' })).toEqual([
      'daemon.config.toml:6:22: channels[0].max_message_length: 2 is too small: must be at least 16',
    ]);
  });

  it('refuses its secret given inline, like every other secret', () => {
    const [p] = problems(`[[channels]]\nid = "lb"\ntype = "postbox"\nallow_from = ["*"]\nkey = "k-123456"\n`, withPostbox);
    expect(p).toMatch(/^daemon\.config\.toml:5:1: channels\[0\]\.key: inline secrets are refused/);
    expect(p).toContain('key_env, key_file or key_credential');
  });

  it('needs allow_from like the platform kinds, since its descriptor does not waive it', () => {
    expect(problems(`[[channels]]\nid = "lb"\ntype = "postbox"\nkey_env = "LB_KEY"\n`, withPostbox, { LB_KEY: 'k' })).toEqual([
      expect.stringMatching(/^daemon\.config\.toml:1:1: channels\[0\]: channel "lb" needs allow_from/),
    ]);
  });

  it('is listed among the kinds only where it is registered', () => {
    expect(problems(`[[channels]]\nid = "lb"\ntype = "loopbak"\n`, withPostbox)).toEqual([
      `daemon.config.toml:3:8: channels[0].type: "loopbak" is not one of ${shipped}, postbox`,
    ]);
    expect(problems(loop(), builtin, { LB_KEY: 'k' })).toEqual([`daemon.config.toml:3:8: channels[0].type: "postbox" is not one of ${shipped}`]);
  });

  it('keeps the built-in kinds as they were: their keys still validate beside it', () => {
    const src = `[[channels]]\nid = "tg"\ntype = "telegram"\nallow_from = ["*"]\ntoken_env = "T"\nmod = "webhook"\n`;
    expect(problems(src, withPostbox, { T: 'x' })).toEqual(['daemon.config.toml:6:1: channels[0].mod: unknown key "mod"; did you mean `mode`?']);
  });
});

describe('ChannelKinds', () => {
  const tiny = (kind: string, shape: z.ZodRawShape = {}): ChannelDescriptor =>
    defineChannel({
      kind,
      summary: kind,
      config: z.strictObject(shape),
      secrets: { names: [], needs: () => ({ required: [], optional: [] }) },
      exclusiveListener: () => false,
      load: () => Promise.reject(new Error('not loaded in this test')),
    });

  const codeOf = (f: () => unknown) => {
    try {
      f();
    } catch (err) {
      return err instanceof CodedError ? `${err.code}: ${err.message}` : String(err);
    }
    return 'no error';
  };

  it('refuses two kinds with one name, a kind key that every channel has already, and an empty registry', () => {
    expect(codeOf(() => new ChannelKinds([tiny('a'), tiny('a')]))).toMatch(/^CHANNEL_KIND_INVALID: two channel kinds are named "a"/);
    expect(codeOf(() => new ChannelKinds([tiny('a', { allow_from: z.string(), type: z.string() })]))).toMatch(
      /^CHANNEL_KIND_INVALID: channel kind "a" declares "allow_from", "type"/,
    );
    expect(codeOf(() => new ChannelKinds([]))).toMatch(/^CHANNEL_KIND_INVALID: /);
  });

  it("runs a kind's own cross-key rules at the key they name (telegram: webhook needs public_url)", () => {
    const src = `[[channels]]\nid = "tg"\ntype = "telegram"\nallow_from = ["*"]\ntoken_env = "T"\nwebhook_secret_env = "W"\nmode = "webhook"\n`;
    expect(problems(src, builtin, { T: 'x', W: 'y' })).toEqual([
      'daemon.config.toml:7:8: channels[0].mode: webhook mode needs public_url (the https address Telegram should post to)',
    ]);
    expect(problems(`${src}public_url = "https://bot.example/tg"\n`, builtin, { T: 'x', W: 'y' })).toEqual([]);
  });

  it('says which listeners run under a cluster lease: polling, gateway and socket ones', () => {
    const exclusive = (toml: string) => {
      const { config, kinds } = parseConfig(`${toml}allow_from = ["*"]\n`, 'daemon.config.toml', builtin, { T: 'x', W: 'y', A: 'a', S: 's' });
      return kinds.of(config.channels[0]!).exclusiveListener(config.channels[0]!);
    };
    expect(exclusive(`[[channels]]\nid = "c"\ntype = "telegram"\ntoken_env = "T"\n`)).toBe(true);
    expect(
      exclusive(`[[channels]]\nid = "c"\ntype = "telegram"\ntoken_env = "T"\nwebhook_secret_env = "W"\nmode = "webhook"\npublic_url = "https://x.example/"\n`),
    ).toBe(false);
    expect(exclusive(`[[channels]]\nid = "c"\ntype = "discord"\ntoken_env = "T"\n`)).toBe(true);
    expect(exclusive(`[[channels]]\nid = "c"\ntype = "slack"\nbot_token_env = "T"\napp_token_env = "A"\n`)).toBe(true);
    expect(exclusive(`[[channels]]\nid = "c"\ntype = "slack"\nbot_token_env = "T"\nsigning_secret_env = "S"\nmode = "http"\n`)).toBe(false);
    expect(exclusive(`[[channels]]\nid = "c"\ntype = "webchat"\n`)).toBe(false);
  });

  it('splits a Discord listener into `shards` leased parts, and reports a bad `shards` at its line and column', () => {
    const parts = (keys: string) => {
      const { config, kinds } = parseConfig(
        `[[channels]]\nid = "c"\ntype = "discord"\ntoken_env = "T"\nallow_from = ["*"]\n${keys}`,
        'daemon.config.toml',
        builtin,
        { T: 'x' },
      );
      return kinds.of(config.channels[0]!).listenerParts?.(config.channels[0]!) ?? 1;
    };
    expect(parts('')).toBe(1);
    expect(parts('shards = 4\n')).toBe(4);
    const src = (v: string) => `[[channels]]\nid = "c"\ntype = "discord"\ntoken_env = "T"\nallow_from = ["*"]\nshards = ${v}\n`;
    expect(problems(src('0'), builtin, { T: 'x' })).toEqual(['daemon.config.toml:6:10: channels[0].shards: 0 is too small: must be at least 1']);
    expect(problems(src('1.5'), builtin, { T: 'x' })).toEqual([expect.stringMatching(/^daemon\.config\.toml:6:10: channels\[0\]\.shards: /)]);
    expect(problems(src('"2"'), builtin, { T: 'x' })).toEqual([expect.stringMatching(/^daemon\.config\.toml:6:10: channels\[0\]\.shards: /)]);
    expect(problems(`${src('2')}shard = 2\n`, builtin, { T: 'x' })).toEqual([
      'daemon.config.toml:7:1: channels[0].shard: unknown key "shard"; did you mean `shards`?',
    ]);
  });
});
