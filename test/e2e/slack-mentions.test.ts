import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { SlackAdapter } from '../../channels/slack/adapter.js';
import { slackStreamText } from '../../channels/slack/mentions.js';
import { isRateLimit } from '../../src/stream/pacer.js';
import { FakeSlack } from '../fakes/slack/server.js';
import { slackAdapterOn } from '../helpers/platforms.js';

/** Model output that tries every kind of Slack ping. */
const PINGS = 'ping <!channel> <!here> <!everyone> <@U0VICTIM> <!subteam^S1>';
const RAW = /<!channel>|<!here>|<!everyone>|<@U0VICTIM>|<!subteam/;

describe('Slack against the fake Web API: every text path escapes mentions; the native stream', () => {
  let sl: FakeSlack;
  let adapter: SlackAdapter;
  beforeEach(async () => {
    sl = new FakeSlack();
    await sl.start();
    adapter = slackAdapterOn(sl);
  });
  afterEach(async () => {
    await sl.close();
  });
  const target = { channelId: 'sl', chatId: 'C0CHAN001', chatType: 'group' as const, threadId: '1700000000.000100' };
  // A channel stream needs the sender of the message it answers (delivered through listen);
  // a DM streams without one, so these go to a DM.
  const dm = { channelId: 'sl', chatId: 'D0DM0001', chatType: 'dm' as const, threadId: '1700000000.000100' };
  /** Nothing stops these calls but the adapter's own request timeout. */
  const o = { signal: new AbortController().signal };
  // Calls that carried `key` (this fake, an older API, refuses markdown_text once: that call has no text).
  const sent = (method: string, key: string) =>
    sl
      .callsOf(method)
      .filter((c) => c.args[key] !== undefined || c.args.markdown_text === undefined)
      .map((c) => c.args[key] ?? '');

  it('chat.postMessage', async () => {
    await adapter.send(target, PINGS, o);
    const [text] = sent('chat.postMessage', 'text');
    expect(text).toContain('&lt;!channel&gt;');
    expect(text).not.toMatch(RAW);
  });

  it('chat.update', async () => {
    const ref = await adapter.send(target, 'draft', o);
    await adapter.edit(ref, PINGS, o);
    const [text] = sent('chat.update', 'text');
    expect(text).toContain('&lt;@U0VICTIM&gt;');
    expect(text).not.toMatch(RAW);
  });

  it('chat.appendStream, also when a mention is split across two appends', async () => {
    const stream = (await adapter.openNativeStream(dm, o))!;
    const full = `${PINGS} more`;
    await stream.update!(full.slice(0, full.indexOf('<!channel>') + 5), o); // 'ping <!cha'
    await stream.update!(full.slice(0, full.indexOf('<@U0VICTIM>') + 6), o); // '… <@U0V'
    await stream.update!(full, o);
    const chunks = sent('chat.appendStream', 'markdown_text');
    expect(chunks.length).toBe(3);
    expect(chunks.join('')).not.toMatch(RAW);
    expect(chunks.join('')).toBe(full.replace(/</g, '&lt;'));
  });

  it('chat.stopStream', async () => {
    const stream = (await adapter.openNativeStream(dm, o))!;
    await stream.update!('start ', o);
    await stream.finish(`start ${PINGS}`, o);
    const [last] = sent('chat.stopStream', 'markdown_text');
    expect(last).toBe(PINGS.replace(/</g, '&lt;'));
    expect(last).not.toMatch(RAW);
  });

  // The stream's markdown_text is the same standard Markdown as chat.postMessage's, where
  // markdownForSlack defuses the bare broadcast words; the stream escaped only `<`. Whether
  // "@here" is one depends on what follows ("@heresy" is not), so the undecided tail waits.
  it('chat.appendStream and chat.stopStream defuse @here, @channel, @everyone, also split across appends', async () => {
    const stream = (await adapter.openNativeStream(dm, o))!;
    await stream.update!('ping @he', o);
    await stream.update!('ping @here and @chan', o);
    await stream.update!('ping @here and @channel, @heresy', o);
    await stream.finish('ping @here and @channel, @heresy @everyone', o);
    const streamed = [...sent('chat.appendStream', 'markdown_text'), ...sent('chat.stopStream', 'markdown_text')].join('');
    expect(streamed).not.toMatch(/@(here|channel|everyone)\b/i);
    expect(streamed).toBe('ping @\u2060here and @\u2060channel, @heresy @\u2060everyone');
    expect(sl.texts('D0DM0001')).toEqual([streamed]);
  });

  it('the stream text only grows as the answer does, whatever prefix a draft stops at', () => {
    const full = 'a @he @here, @heresy @channel.@everyone @Here @ch <@U1> @everyones @';
    const at = (i: number) => slackStreamText(full.slice(0, i), false);
    for (let i = 0; i < full.length; i++) expect(at(i + 1).startsWith(at(i))).toBe(true);
    expect(slackStreamText(full, true).startsWith(at(full.length))).toBe(true);
    expect(slackStreamText(full, true)).toBe('a @he @\u2060here, @heresy @\u2060channel.@\u2060everyone @\u2060Here @ch &lt;@U1> @everyones @');
  });

  // Slack appends, so each call sends only what is new. A 429 keeps the stream (the reply
  // waits and goes on): the part that call carried must go with the next one, or the
  // answer has a hole where it was.
  it('after a 429 on an append, the next call carries the part Slack did not take', async () => {
    const stream = (await adapter.openNativeStream(dm, o))!;
    expect(stream.ref).toMatchObject({ chatId: 'D0DM0001', threadId: dm.threadId });
    await stream.update!('one ', o);
    sl.fail('chat.appendStream', { status: 429, retryAfter: 1 });
    const refused = await stream.update!('one two ', o).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(isRateLimit(refused)).toBe(true);
    await stream.update!('one two three ', o);
    const ref = await stream.finish('one two three four', o);
    expect(ref.messageId).toBe(stream.ref!.messageId);
    expect(sl.texts('D0DM0001')).toEqual(['one two three four']);
  });
});
