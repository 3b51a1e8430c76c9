import { describe, expect, it, onTestFinished } from 'vitest';
import { DiscordAdapter } from '../../../channels/discord/adapter.js';
import { createLogger } from '../../../src/observe/logger.js';
import { FakeDiscord } from '../../fakes/discord/server.js';
import { LogSink } from '../../helpers/daemon.js';

/** What discord.js makes of one post on a 5xx: the first try and its 3 retries, each with the same body. */
const TRIES_PER_POST = 4;
const OFF_LOG = 'this Discord API does not take enforce_nonce';

async function start() {
  const dc = new FakeDiscord();
  await dc.start();
  onTestFinished(() => dc.close());
  const logs = new LogSink();
  const adapter = new DiscordAdapter({ id: 'dc', restApi: dc.restApi, guilds: [], log: createLogger({ level: 'warn', destination: logs }) }, dc.token);
  const target = { channelId: 'dc', chatId: dc.dmChannel, chatType: 'dm' as const };
  const send = (text: string, key: string) => adapter.send(target, text, { signal: new AbortController().signal, idempotencyKey: key });
  return { dc, logs, send };
}

describe('Discord sends and enforce_nonce', () => {
  it('a 504 after Discord stored the message: the retry with the same nonce and the field returns it, never a second one', async () => {
    const { dc, logs, send } = await start();
    // More such incidents than the old code forgave before it dropped the field for good.
    for (let n = 0; n < 4; n++) {
      dc.fail('POST message', { status: 504, afterStoring: true }, TRIES_PER_POST);
      const key = `12345678901234567${n}:0`;
      await expect(send(`answer ${n}`, key)).rejects.toMatchObject({ code: 'CHANNEL_UNAVAILABLE' });
      // The reply's retry (ReplyStream sends the chunk again with its key).
      const again = await send(`answer ${n}`, key);
      expect(again.messageId).toBe(dc.messages.at(-1)!.id);
      expect(dc.texts(dc.dmChannel)).toHaveLength(n + 1);
    }
    expect(dc.texts(dc.dmChannel)).toEqual(['answer 0', 'answer 1', 'answer 2', 'answer 3']);
    const posts = dc.restCalls('POST', 'message');
    expect(posts).toHaveLength(4 * (TRIES_PER_POST + 1));
    expect(posts.every((c) => c.body?.enforce_nonce === true && typeof c.body.nonce === 'string')).toBe(true);
    expect(logs.text).not.toContain(OFF_LOG);
  });

  it('the retry carries later text (a draft stored behind a 504, then the final): the message returned for the nonce is brought to it', async () => {
    const { dc, send } = await start();
    dc.fail('POST message', { status: 504, afterStoring: true }, TRIES_PER_POST);
    await expect(send('the dra', '444444444444444444:0')).rejects.toMatchObject({ code: 'CHANNEL_UNAVAILABLE' });
    expect(dc.texts(dc.dmChannel)).toEqual(['the dra']);
    const ref = await send('the draft, finished', '444444444444444444:0');
    expect(ref.messageId).toBe(dc.messages[0]!.id);
    expect(dc.texts(dc.dmChannel)).toEqual(['the draft, finished']);
    expect(dc.restCalls('PATCH', 'message')).toHaveLength(1);
  });

  it('a Discord 400 about another field is a failed send, not a server without enforce_nonce', async () => {
    const { dc, logs, send } = await start();
    const tooLong = { code: 'BASE_TYPE_MAX_LENGTH', message: 'Must be 2000 or fewer in length.' };
    dc.enforceNonceAnswer = { status: 400, json: { message: 'Invalid Form Body', code: 50035, errors: { content: { _errors: [tooLong] } } } };
    await expect(send('refused', '111111111111111111:0')).rejects.toMatchObject({ code: 'CHANNEL_REQUEST_FAILED' });
    dc.enforceNonceAnswer = undefined;
    await send('next', '222222222222222222:0');
    expect(dc.texts(dc.dmChannel)).toEqual(['next']);
    expect(dc.restCalls('POST', 'message').every((c) => c.body?.enforce_nonce === true)).toBe(true);
    expect(logs.text).not.toContain(OFF_LOG);
  });

  it('a 400 naming the field: the message goes without it (the nonce stays), and so does every later one', async () => {
    const { dc, logs, send } = await start();
    dc.enforceNonceAnswer = { status: 400 };
    await send('first', '333333333333333333:0');
    await send('second', '333333333333333333:1');
    expect(dc.texts(dc.dmChannel)).toEqual(['first', 'second']);
    const posts = dc.restCalls('POST', 'message');
    expect(posts.map((c) => c.body?.enforce_nonce)).toEqual([true, undefined, undefined]);
    expect(posts.every((c) => typeof c.body?.nonce === 'string')).toBe(true);
    expect(logs.text.split(OFF_LOG).length - 1).toBe(1);
  });
});
