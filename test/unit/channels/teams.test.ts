import { describe, expect, it } from 'vitest';
import { neutraliseMentions } from '../../../channels/teams/cards.js';
import { malformedActivity, normalizeActivity } from '../../../channels/teams/normalize.js';
import { configProblems } from '../../helpers/config.js';

const table = (extra: string) => `[[channels]]\nid = "ms"\ntype = "teams"\napp_password_env = "MS"\nallow_from = ["*"]\n${extra}`;

describe('Teams config', () => {
  it('names the key and its file:line:col', () => {
    expect(configProblems(table('app_id = "my-bot"\n'), 'daemon.config.toml', { MS: 'p' })).toEqual([
      'daemon.config.toml:6:10: channels[0].app_id: write the Microsoft App ID, a GUID like "00000000-0000-0000-0000-000000000000"',
    ]);
    expect(configProblems(table('app_id = "11111111-2222-3333-4444-555555555555"\ntoken_url = "nope"\n'), 'daemon.config.toml', { MS: 'p' })[0]).toMatch(
      /^daemon\.config\.toml:7:13: channels\[0\]\.token_url: /,
    );
    expect(configProblems(table('app_id = "11111111-2222-3333-4444-555555555555"\n'), 'daemon.config.toml', {}).join('\n')).toMatch(/app_password/);
    expect(configProblems(table('app_id = "11111111-2222-3333-4444-555555555555"\n'), 'daemon.config.toml', { MS: 'p' })).toEqual([]);
  });
});

describe('Teams activities', () => {
  const base = {
    type: 'message',
    id: '1',
    serviceUrl: 'https://smba.trafficmanager.net/teams/',
    from: { id: '29:x', aadObjectId: 'aad-1', name: 'Ada' },
    conversation: { id: '19:c@thread.v2', conversationType: 'groupChat' },
    recipient: { id: '28:bot', name: 'Bot' },
  };

  it('a mention of the bot addresses it and is taken out; the sender is the AAD object id', () => {
    const m = normalizeActivity(
      { ...base, text: '<at>Bot</at> /stop', entities: [{ type: 'mention', text: '<at>Bot</at>', mentioned: { id: '28:bot' } }] },
      'ms',
    );
    expect(m).toMatchObject({ text: '/stop', addressed: true, sender: { id: 'aad-1', name: 'Ada' }, chat: { type: 'group', id: '19:c@thread.v2' } });
    expect(normalizeActivity({ ...base, text: 'hi <at>Bob</at>', entities: [{ type: 'mention', mentioned: { id: '29:bob' } }] }, 'ms')).toMatchObject({
      text: 'hi @Bob',
      addressed: false,
    });
  });

  it('a card click (Action.Submit value) is the command; other activity types carry no message; bad ones are named', () => {
    expect(normalizeActivity({ ...base, value: { channeld: '/approve abc123' } }, 'ms')).toMatchObject({ text: '/approve abc123', addressed: true });
    expect(normalizeActivity({ ...base, type: 'conversationUpdate' }, 'ms')).toBeUndefined();
    expect(malformedActivity(null)).toBe('the activity is not a JSON object');
    expect(malformedActivity({ ...base, serviceUrl: 'file:///etc' })).toBe('an activity without a serviceUrl');
    expect(malformedActivity({ ...base, from: undefined })).toBe('a message without a sender');
  });

  it('<at> tags in answers are written as text', () => {
    expect(neutraliseMentions('hi <at>everyone</at> and <at id="x">Bob</at>, <attic>')).toBe(
      'hi &lt;at>everyone&lt;/at> and &lt;at id="x">Bob&lt;/at>, <attic>',
    );
  });
});
