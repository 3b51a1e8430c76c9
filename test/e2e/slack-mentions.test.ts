import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { SlackAdapter } from '../../channels/slack/adapter.js';
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
    const stream = (await adapter.openNativeStream(target, o))!;
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
    const stream = (await adapter.openNativeStream(target, o))!;
    await stream.update!('start ', o);
    await stream.finish(`start ${PINGS}`, o);
    const [last] = sent('chat.stopStream', 'markdown_text');
    expect(last).toBe(PINGS.replace(/</g, '&lt;'));
    expect(last).not.toMatch(RAW);
  });

  // Slack appends, so each call sends only what is new. A 429 keeps the stream (the reply
  // waits and goes on): the part that call carried must go with the next one, or the
  // answer has a hole where it was.
  it('after a 429 on an append, the next call carries the part Slack did not take', async () => {
    const stream = (await adapter.openNativeStream(target, o))!;
    expect(stream.ref).toMatchObject({ chatId: 'C0CHAN001', threadId: target.threadId });
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
    expect(sl.texts('C0CHAN001')).toEqual(['one two three four']);
  });
});
