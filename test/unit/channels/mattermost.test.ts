import { describe, expect, it } from 'vitest';
import { builtinKinds } from '../../../channels/registry.js';
import { classifyMattermostError, MattermostApiError } from '../../../channels/mattermost/errors.js';
import { neutralizeMattermostMentions } from '../../../channels/mattermost/mentions.js';
import { normalizePost, readPosted, skipReason, type MmPost, type MmScope } from '../../../channels/mattermost/normalize.js';
import { ChannelKinds } from '../../../src/config/kinds.js';
import { parseConfig } from '../../../src/config/load.js';
import { ConfigError } from '../../../src/contracts/errors.js';

const kinds = new ChannelKinds(builtinKinds);

function problems(source: string, env: NodeJS.ProcessEnv): string[] {
  try {
    parseConfig(source, 'daemon.config.toml', kinds, env);
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
  return [];
}

describe('Mattermost config', () => {
  it('parses url, token and the allowlists', () => {
    const src = '[[channels]]\nid = "mm"\ntype = "mattermost"\nurl = "https://chat.example.com"\ntoken_env = "MM"\nallow_from = ["*"]\nteams = ["acme"]\n';
    const { config, secrets } = parseConfig(src, 'daemon.config.toml', kinds, { MM: 'tok' });
    expect(config.channels[0]).toMatchObject({ type: 'mattermost', url: 'https://chat.example.com', teams: ['acme'], channels: [], require_mention: true });
    expect(secrets.get('channels.mm', 'token')).toBe('tok');
  });

  it('names a bad url, a misspelt key and a missing token with file:line:col', () => {
    const src = '[[channels]]\nid = "mm"\ntype = "mattermost"\nurl = "chat.example.com"\nallow_from = ["*"]\nchanels = ["x"]\n';
    expect(problems(src, {})).toEqual([
      'daemon.config.toml:4:7: channels[0].url: write the server address with http(s)://, e.g. "https://chat.example.com"',
      'daemon.config.toml:6:1: channels[0].chanels: unknown key "chanels"; did you mean `channels`?',
    ]);
    expect(problems(src.replace('chat.example.com', 'https://chat.example.com').replace('chanels', 'channels'), {})).toEqual([
      'daemon.config.toml:1:1: channels[0]: channel "mm" needs token_env, or token_file, or token_credential',
    ]);
  });
});

describe('Mattermost mentions', () => {
  it('@channel, @all and @here never notify, outside code; code is kept', () => {
    expect(neutralizeMattermostMentions('hi @channel, @ALL and @here!\n`@here` ok\n```\n@all\n```')).toBe(
      'hi @\u2060channel, @\u2060ALL and @\u2060here!\n`@here` ok\n```\n@all\n```',
    );
    expect(neutralizeMattermostMentions('mail me at a@allmail.com or @channels')).toBe('mail me at a@allmail.com or @channels');
  });
});

describe('Mattermost posts', () => {
  const scope: MmScope = { botId: 'bot', botName: 'channeld', teams: new Set(['acme']), channels: new Set(), teamNames: new Map([['T1', 'acme']]) };
  const post = (o: Partial<MmPost> = {}): MmPost => ({ id: 'p1', create_at: 1, user_id: 'u1', channel_id: 'c1', message: 'hi', ...o });
  const where = (o = {}) => ({ channelType: 'O', channelName: 'town-square', teamId: 'T1', senderName: 'ada', mentions: [] as string[], ...o });

  it('reads a posted event: the post and mentions are JSON strings', () => {
    const data = { post: JSON.stringify(post()), channel_type: 'D', channel_name: 'a__b', team_id: '', sender_name: '@ada', mentions: '["bot"]' };
    expect(readPosted(data)).toEqual({
      post: post(),
      where: { channelType: 'D', channelName: 'a__b', teamId: undefined, senderName: 'ada', mentions: ['bot'] },
    });
    expect(readPosted({ post: '{' })).toBeUndefined();
    expect(readPosted({ post: 'null' })).toBeUndefined();
    expect(readPosted(undefined)).toBeUndefined();
  });

  it('skips its own posts, system posts and channels outside the allowlists; DMs pass', () => {
    expect(skipReason(post({ user_id: 'bot' }), where(), scope)).toBe('own post');
    expect(skipReason(post({ type: 'system_join_channel' }), where(), scope)).toBe('system post system_join_channel');
    expect(skipReason(post(), where({ teamId: 'T2' }), scope)).toBe('team not in teams');
    expect(skipReason(post(), where(), scope)).toBeUndefined();
    expect(skipReason(post(), where({ channelType: 'D', teamId: undefined }), scope)).toBeUndefined();
    expect(skipReason(post(), where(), { ...scope, channels: new Set(['off-topic']) })).toBe('channel not in channels');
  });

  it('a mention addresses the bot and leaves the text; a thread is kept; " /stop" is a command', () => {
    expect(normalizePost(post({ message: '@channeld hello' }), where(), 'mm', scope)).toMatchObject({
      text: 'hello',
      addressed: true,
      chat: { type: 'group' },
    });
    expect(normalizePost(post({ message: 'hello' }), where(), 'mm', scope)).toMatchObject({ addressed: false });
    expect(normalizePost(post({ message: 'ask @channeld.bot or @channeld-old' }), where(), 'mm', scope)).toMatchObject({ addressed: false });
    expect(normalizePost(post({ message: 'hey @Channeld what now?' }), where(), 'mm', scope)).toMatchObject({ addressed: true, text: 'hey what now?' });
    expect(normalizePost(post({ message: 'hi', root_id: 'r1' }), where({ mentions: ['bot'] }), 'mm', scope)).toMatchObject({ threadId: 'r1', addressed: true });
    expect(normalizePost(post({ message: ' /stop' }), where({ channelType: 'D' }), 'mm', scope)).toMatchObject({
      text: '/stop',
      addressed: true,
      chat: { type: 'dm' },
    });
  });
});

describe('Mattermost errors', () => {
  const api = (status: number, retryAfterMs?: number) => classifyMattermostError(new MattermostApiError(status, 'x', 'm', retryAfterMs), 'create post');
  it('sorts by status', () => {
    expect(api(401)).toMatchObject({ code: 'CHANNEL_AUTH_FAILED', retryable: false });
    expect(api(429, 2000)).toMatchObject({ code: 'CHANNEL_RATE_LIMITED', retryAfterMs: 2000 });
    expect(api(403)).toMatchObject({ code: 'CHANNEL_FORBIDDEN' });
    expect(api(502)).toMatchObject({ code: 'CHANNEL_UNAVAILABLE', retryable: true });
    expect(api(400)).toMatchObject({ code: 'CHANNEL_REQUEST_FAILED', retryable: false });
    expect(classifyMattermostError(new TypeError('fetch failed'))).toMatchObject({ code: 'CHANNEL_NETWORK' });
  });
});
