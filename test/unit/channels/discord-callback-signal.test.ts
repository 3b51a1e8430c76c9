import { describe, expect, it, onTestFinished } from 'vitest';
import { DiscordAdapter } from '../../../channels/discord/adapter.js';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import { createLogger } from '../../../src/observe/logger.js';
import { FakeDiscord } from '../../fakes/discord/server.js';
import { waitFor } from '../../helpers/daemon.js';
import { scaled } from '../../helpers/timing.js';

describe('the Discord interaction callback', () => {
  it('is cut when the channel stops: it takes the listen signal', async () => {
    const dc = new FakeDiscord();
    await dc.start();
    onTestFinished(() => dc.close());
    const adapter = new DiscordAdapter({ id: 'dc', restApi: dc.restApi, guilds: [], log: createLogger({ level: 'silent' }) }, dc.token);
    const stop = new AbortController();
    onTestFinished(() => stop.abort());
    await adapter.send({ channelId: 'dc', chatId: dc.dmChannel, chatType: 'dm' }, 'Approve?', {
      signal: stop.signal,
      buttons: [{ label: 'Yes', data: 'yes' }],
    });
    // The server never answers the callback while the client stays.
    dc.holdInteractionCallbacks = true;
    const got: ChannelMessage[] = [];
    let connected = false;
    const listening = adapter.listen(
      async (m) => {
        got.push(m);
        return true;
      },
      stop.signal,
      () => (connected = true),
    );
    await waitFor(() => connected, scaled(10_000));
    dc.click(dc.messages.at(-1)!, 'Yes');
    await waitFor(() => dc.interactionCallbacks.length > 0, scaled(10_000));
    expect(got.map((m) => m.text)).toEqual(['yes']);

    stop.abort();
    await listening.catch(() => {});
    await waitFor(() => dc.callbacksHungUp > 0, scaled(10_000));
  });
});
