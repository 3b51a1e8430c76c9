import { describe, expect, it, onTestFinished } from 'vitest';
import { DiscordAdapter } from '../../../channels/discord/adapter.js';
import { CLICK_NOT_KEPT } from '../../../channels/discord/clicks.js';
import { CodedError } from '../../../src/contracts/errors.js';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import { createLogger } from '../../../src/observe/logger.js';
import { FakeDiscord, INTERACTION_ANSWER_MS } from '../../fakes/discord/server.js';
import { LogSink, waitFor } from '../../helpers/daemon.js';

/** The adapter listening on the fake, with a message carrying a "Yes" button; `deliver` is the store. */
async function listening(deliver: (m: ChannelMessage) => Promise<boolean>) {
  const dc = new FakeDiscord();
  await dc.start();
  onTestFinished(() => dc.close());
  const logs = new LogSink();
  const adapter = new DiscordAdapter({ id: 'dc', restApi: dc.restApi, guilds: [], log: createLogger({ level: 'warn', destination: logs }) }, dc.token);
  const stop = new AbortController();
  await adapter.send({ channelId: 'dc', chatId: dc.dmChannel, chatType: 'dm' }, 'Approve?', { signal: stop.signal, buttons: [{ label: 'Yes', data: 'yes' }] });
  let connected = false;
  const run = adapter.listen(deliver, stop.signal, () => (connected = true));
  onTestFinished(async () => {
    stop.abort();
    await run.catch(() => {});
  });
  await waitFor(() => connected, 10_000);
  return { dc, logs, question: dc.messages.at(-1)! };
}

describe('a Discord button click', () => {
  it('is acknowledged within Discord’s 3 s while the store holds it past them', async () => {
    const got: ChannelMessage[] = [];
    let dc!: FakeDiscord;
    let clicked = '';
    // Storage degraded: the click is stored only once Discord's window for its answer has closed.
    const ctx = await listening(async (m) => {
      await waitFor(() => dc.answerWindowClosed(clicked), 2 * INTERACTION_ANSWER_MS);
      got.push(m);
      return true;
    });
    dc = ctx.dc;
    clicked = dc.click(ctx.question, 'Yes');
    await waitFor(() => got.length === 1 && dc.interactionCallbacks.length === 1, 10_000);
    expect(dc.interactionCallbacks).toEqual([{ id: clicked, type: 6, status: 204, afterMs: expect.any(Number) }]);
    expect(dc.interactionCallbacks[0]!.afterMs).toBeLessThan(INTERACTION_ANSWER_MS);
    expect(got.map((m) => [m.text, m.messageId])).toEqual([['yes', `interaction:${clicked}`]]);
    expect(dc.followUps).toEqual([]);
  });

  it('not stored: acknowledged, and its user alone is asked to click again', async () => {
    const { dc, logs, question } = await listening(() =>
      Promise.reject(new CodedError('STORAGE_UNAVAILABLE', 'the message was not stored and the hold is full', { retryable: true })),
    );
    const clicked = dc.click(question, 'Yes');
    await waitFor(() => dc.followUps.length === 1, 10_000);
    expect(dc.interactionCallbacks).toMatchObject([{ id: clicked, type: 6, status: 204 }]);
    // Ephemeral (flags 64), on the interaction's token after its first answer: Discord took it.
    expect(dc.followUps).toEqual([{ interactionId: clicked, content: CLICK_NOT_KEPT, flags: 64, status: 200 }]);
    expect(dc.texts(dc.dmChannel)).toEqual(['Approve?']);
    await waitFor(() => logs.text.includes('Discord button click not stored'));
    expect(logs.text).toContain('STORAGE_UNAVAILABLE');
  });
});
