import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { builtinKinds } from '../../../channels/registry.js';
import { parseConfig } from '../../../src/config/load.js';
import { kinds } from '../../helpers/kinds.js';
import { configProblems } from '../../helpers/config.js';

const problems = (source: string, env: NodeJS.ProcessEnv = {}): string[] => configProblems(source, '/etc/channeld/daemon.config.toml', env);

const web = `[[channels]]\nid = "web"\ntype = "webchat"\n`;

describe('config validation', () => {
  it('accepts the minimal config and fills every default', () => {
    const { config } = parseConfig(web, 'daemon.config.toml', kinds, {});
    expect(config.http.listen).toBe('127.0.0.1:8787');
    expect(config.limits).toEqual({
      max_in_flight: 32,
      max_queued: 256,
      queue_mode: 'followup',
      collect_debounce_ms: 500,
      passive_max_conversations: 1000,
      passive_max_bytes: 8 * 1024 * 1024,
      max_attachment_bytes: 10485760,
      attachment_timeout_ms: 30000,
    });
    expect(config.agents.default?.provider).toBe('echo');
    expect(config.channels[0]).toMatchObject({
      require_mention: true,
      scope: 'chat',
      stream_mode: 'partial',
      backoff: { initial_ms: 1000, factor: 2, max_ms: 60000, stable_ms: 300000 },
    });
  });

  it('reply_intent = "classifier" needs an openai-compatible agent; the new channel keys validate', () => {
    expect(problems(`${web}reply_intent = "classifier"\n`)).toEqual([
      expect.stringMatching(/^daemon\.config\.toml:4:16: channels\[0\]\.reply_intent: reply_intent = "classifier" asks a model/),
    ]);
    expect(problems(`${web}reply_intent = "always"\n`)[0]).toContain('is not one of mention, classifier');
    const { config } = parseConfig(
      `[agent]\nprovider = "openai-compatible"\nbase_url = "http://127.0.0.1:1/v1"\nmodel = "m"\n${web}reply_intent = "classifier"\nintent_model = "tiny"\nack_reaction = "👀"\nadmins = ["1"]\n`,
      'daemon.config.toml',
      kinds,
      {},
    );
    expect(config.channels[0]).toMatchObject({ reply_intent: 'classifier', intent_model: 'tiny', ack_reaction: '👀', admins: ['1'] });
  });

  it('names an unknown key with its line and column', () => {
    expect(problems(`[daemon]\nlog_level = "info"\nlog_levle = "debug"\n`)).toEqual([
      'daemon.config.toml:3:1: daemon.log_levle: unknown key "log_levle"; did you mean `log_level`?',
    ]);
  });

  it('names a wrong type with the line, and what was given', () => {
    expect(problems(`[limits]\nmax_in_flight = "lots"\n`)).toEqual(['daemon.config.toml:2:17: limits.max_in_flight: expected number, got "lots"']);
  });

  it('names a bad enum value and lists what is allowed', () => {
    const src = `${web}\n[[channels]]\nid = "tg"\ntype = "telgram"\n`;
    expect(problems(src)).toEqual([`daemon.config.toml:7:8: channels[1].type: "telgram" is not one of ${builtinKinds.map((k) => k.kind).join(', ')}`]);
    expect(problems(`[daemon]\nlog_level = "loud"\n`)[0]).toMatch(
      /^daemon\.config\.toml:2:13: daemon\.log_level: "loud" is not one of trace, debug, info, warn, error$/,
    );
  });

  it('refuses an inline token and says which three keys to use', () => {
    const src = `[[channels]]\nid = "tg"\ntype = "telegram"\nallow_from = ["*"]\ntoken = "123:abc"\n`;
    const [p] = problems(src);
    expect(p).toMatch(/^daemon\.config\.toml:5:1: channels\[0\]\.token: inline secrets are refused/);
    expect(p).toContain('token_env, token_file or token_credential');
    expect(p).not.toContain('123:abc');
  });

  it('names the channel and the variable when a token env var is missing', () => {
    const src = `[[channels]]\nid = "tg"\ntype = "telegram"\nallow_from = ["*"]\ntoken_env = "TG_TOKEN"\n`;
    expect(problems(src)).toEqual(['daemon.config.toml:5:13: channels[0].token_env: environment variable TG_TOKEN is not set or empty (channel "tg")']);
    expect(problems(src, { TG_TOKEN: '1:x' })).toEqual([]);
  });

  it('reads token_file and token_credential, and names a missing file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'channeld-cfg-'));
    writeFileSync(join(dir, 'tok'), 'secret-from-file\n');
    const viaFile = parseConfig(
      `[[channels]]\nid = "d"\ntype = "discord"\nallow_from = ["*"]\ntoken_file = "${join(dir, 'tok')}"\n`,
      'daemon.config.toml',
      kinds,
      {},
    );
    expect(viaFile.secrets.get('channels.d', 'token')).toBe('secret-from-file');
    const viaCred = parseConfig(`[[channels]]\nid = "d"\ntype = "discord"\nallow_from = ["*"]\ntoken_credential = "tok"\n`, 'daemon.config.toml', kinds, {
      CREDENTIALS_DIRECTORY: dir,
    });
    expect(viaCred.secrets.get('channels.d', 'token')).toBe('secret-from-file');
    expect(problems(`[[channels]]\nid = "d"\ntype = "discord"\nallow_from = ["*"]\ntoken_file = "/nonexistent/tok"\n`)[0]).toMatch(
      /:5:\d+: channels\[0\]\.token_file: cannot read \/nonexistent\/tok: ENOENT \(channel "d"\)/,
    );
  });

  it('requires allow_from on platform channels', () => {
    expect(problems(`[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "T"\n`, { T: 'x' })[0]).toMatch(
      /^daemon\.config\.toml:1:1: channels\[0\]: channel "tg" needs allow_from/,
    );
  });

  it('reports a TOML syntax error with line and column', () => {
    expect(problems(`[daemon\n`)[0]).toMatch(/^daemon\.config\.toml:1:\d+: syntax: /);
  });

  it('locates keys inside [channels.backoff] of the right channel', () => {
    const src = `${web}\n[[channels]]\nid = "web2"\ntype = "webchat"\n[channels.backoff]\nfactor = 0\n`;
    expect(problems(src)).toEqual(['daemon.config.toml:9:10: channels[1].backoff.factor: 0 is too small: must be at least 1']);
  });

  it('rejects duplicate channel ids', () => {
    expect(problems(`${web}${web}`)[0]).toMatch(/:5:6: channels\[1\]\.id: "web" is already used by channels\[0\]/);
  });

  it('with several agents, a channel must name one, and the name must exist', () => {
    const agents = `[agents.support]\nprovider = "echo"\n[agents.fun]\nprovider = "echo"\n`;
    expect(problems(`${agents}${web}`)[0]).toMatch(/channels\[0\]: channel "web" needs agent = one of support, fun/);
    expect(problems(`${agents}${web}agent = "nope"\n`)[0]).toMatch(/:8:9: channels\[0\]\.agent: channel "web" is bound to agent "nope", which is not defined/);
    expect(problems(`${agents}${web}agent = "fun"\n`)).toEqual([]);
  });

  it('lists every problem, in file order', () => {
    const src = `[daemon]\nbogus = 1\n[limits]\nmax_queued = -1\n${web}extra = true\n`;
    const lines = problems(src);
    expect(lines.map((l) => l.split(':')[1])).toEqual(['2', '4', '8']);
  });

  it('shows schema errors, duplicate ids and missing secrets in one run', () => {
    const src = `[daemon]\nlog_levl = "info"\n${web}\n[[channels]]\nid = "web"\ntype = "telegram"\nallow_from = ["*"]\ntoken_env = "TG_MISSING"\nbogus = 1\n`;
    const lines = problems(src);
    expect(lines).toEqual([
      'daemon.config.toml:2:1: daemon.log_levl: unknown key "log_levl"; did you mean `log_level`?',
      'daemon.config.toml:8:6: channels[1].id: "web" is already used by channels[0]; ids must be unique',
      'daemon.config.toml:11:13: channels[1].token_env: environment variable TG_MISSING is not set or empty (channel "web")',
      'daemon.config.toml:12:1: channels[1].bogus: unknown key "bogus"',
    ]);
  });

  it('suggests the key a typo meant in channels and agents, and nothing for a far-off word', () => {
    expect(problems(`${web}requre_mention = false\n`)[0]).toContain('did you mean `require_mention`?');
    expect(problems(`[agent]\nsystem_promt = "x"\n`)[0]).toContain('did you mean `system_prompt`?');
    expect(problems(`[daemon]\nzzzzzzzz = 1\n`)[0]).not.toContain('did you mean');
  });

  it('names an unterminated string by its opening quote', () => {
    expect(problems(`[daemon]\nlog_level = "info\nshutdown_grace_ms = 5\n`)).toEqual([
      'daemon.config.toml:2:13: syntax: unterminated string: the " opened here is not closed on this line (add the closing ", or use """ for a multi-line string)',
    ]);
    expect(problems(`[agent]\nsystem_prompt = 'hi`)[0]).toMatch(/:2:17: syntax: unterminated string: the ' opened here/);
  });
});
