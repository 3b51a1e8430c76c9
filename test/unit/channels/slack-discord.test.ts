import { describe, expect, it } from 'vitest';
import { classifyClose } from '../../../channels/discord/errors.js';
import { markdownToMrkdwn } from '../../../channels/slack/mrkdwn.js';
import { normalizeEvent } from '../../../channels/slack/normalize.js';
import { malformedEnvelope } from '../../../channels/slack/receiver.js';
import { neutralizeSlackMentions } from '../../../channels/slack/mentions.js';

describe('Slack mrkdwn', () => {
  it('converts bold, italic, strike, links and headings; keeps code; escapes <, > and &', () => {
    expect(markdownToMrkdwn('**bold** *it* ~~gone~~ [site](https://x.org)')).toBe('*bold* _it_ ~gone~ <https://x.org|site>');
    expect(markdownToMrkdwn('# Title\n<!channel> & co')).toBe('*Title*\n&lt;!channel&gt; &amp; co');
    expect(markdownToMrkdwn('```ts\nconst a = b **c**;\n```')).toBe('```\nconst a = b **c**;\n```');
  });
});

describe('Slack mention escaping', () => {
  it('neutralizes broadcasts and user mentions, and keeps a growing text growing', () => {
    expect(neutralizeSlackMentions('hi <!channel> <!here> <!everyone> <@U123> <#C1> <!subteam^S1>')).toBe(
      'hi &lt;!channel> &lt;!here> &lt;!everyone> &lt;@U123> &lt;#C1> &lt;!subteam^S1>',
    );
    const full = 'a <!here> b';
    for (let i = 0; i <= full.length; i++) expect(neutralizeSlackMentions(full).startsWith(neutralizeSlackMentions(full.slice(0, i)))).toBe(true);
  });
});

describe('Slack envelopes that pass authentication but are not events', () => {
  it('null and an event_callback without an event are malformed; other envelopes are fine', () => {
    expect(malformedEnvelope(null)).toBeTypeOf('string');
    expect(malformedEnvelope([])).toBeTypeOf('string');
    expect(malformedEnvelope({ type: 'event_callback', event: null })).toBeTypeOf('string');
    expect(malformedEnvelope({ type: 'event_callback', event: { type: 'message' } })).toBeUndefined();
    expect(malformedEnvelope({ type: 'url_verification', challenge: 'c' })).toBeUndefined();
  });
});

describe('Slack event normalization', () => {
  it('an event without channel or ts yields no message', () => {
    expect(normalizeEvent({ type: 'message', user: 'U1', text: 'x' } as never, 's', 'UB', true)).toBeUndefined();
  });

  const base = { channel: 'C1', user: 'U1', ts: '1700000000.000100' };
  it('a top-level mention starts its thread; DMs are addressed; subtypes and bots are handled', () => {
    expect(normalizeEvent({ ...base, type: 'app_mention', text: '<@UB> hi' }, 's', 'UB', true)).toMatchObject({
      threadId: base.ts,
      text: 'hi',
      addressed: true,
      chat: { type: 'group' },
      messageId: 'C1:1700000000.000100',
    });
    expect(normalizeEvent({ ...base, type: 'message', channel: 'D1', channel_type: 'im', text: 'yo' }, 's', 'UB', true)).toMatchObject({
      chat: { type: 'dm' },
      addressed: true,
    });
    expect(normalizeEvent({ ...base, type: 'message', text: 'chatter' }, 's', 'UB', true)).toMatchObject({ addressed: false });
    expect(normalizeEvent({ ...base, type: 'message', subtype: 'message_changed', text: 'x' }, 's', 'UB', true)).toBeUndefined();
    expect(normalizeEvent({ ...base, type: 'message', bot_id: 'B2', text: 'beep' }, 's', 'UB', true)).toMatchObject({ sender: { isBot: true } });
  });
});

describe('Discord close codes', () => {
  it('each fatal code says what to fix', () => {
    expect(classifyClose(4004)).toMatchObject({ code: 'CHANNEL_AUTH_FAILED', retryable: false });
    expect(classifyClose(4014).message).toContain('Message Content Intent');
    expect(classifyClose(4013)).toMatchObject({ code: 'CHANNEL_FORBIDDEN' });
    for (const c of [4010, 4011, 4012]) expect(classifyClose(c).retryable).toBe(false);
    expect(classifyClose(4000).retryable).toBe(true);
  });
});
