import { describe, expect, it } from 'vitest';
import { MAX_FRAME_BYTES } from '../../../channels/slack/receiver.js';
import { waitFor } from '../../helpers/daemon.js';
import { withChannelDaemon } from '../../helpers/fixtures.js';
import { slackChannel, slackEnv, withSlack } from '../../helpers/platforms.js';
import { echoAgent } from '../../helpers/toml.js';

describe('Slack Socket Mode frame bound', () => {
  it('a frame over the bound fails the socket with 1009; the SDK reconnects, it is logged, and the channel is not parked', async () => {
    const sl = await withSlack();
    const d = await withChannelDaemon(echoAgent(0) + slackChannel(sl, 'native_stream = false\n'), slackEnv(sl));
    await waitFor(() => sl.openSockets.includes(1), 10_000);

    // A frame of exactly the bound is read: the event after it is answered on the same socket.
    sl.sendFrame(MAX_FRAME_BYTES);
    sl.push(sl.dmEvent('at the bound'));
    await waitFor(() => sl.texts('D0DM0001').includes('at the bound'), 10_000);
    expect(sl.connections).toBe(1);

    // One byte more is refused before it is buffered whole: the client fails the socket with 1009.
    sl.sendFrame(MAX_FRAME_BYTES + 1);
    const closed = await waitFor(() => sl.socketLog.find((e) => e.socket === 1 && e.event === 'close'), 10_000);
    expect(closed.code).toBe(1009);

    // The SDK reconnects on its own (after its 5 s pause); the supervisor logs the loss and its reason.
    await waitFor(() => sl.openSockets.includes(2), 20_000);
    await waitFor(() => d.daemon.status().channels.find((c) => c.id === 'sl')?.state === 'connected', 10_000);
    const backoff = d.logs.entries().find((l) => l.msg === 'channel sl backing off');
    expect(backoff).toMatchObject({ error: { code: 'CHANNEL_NETWORK', message: expect.stringContaining('1009') } });
    expect(d.logs.entries().some((l) => l.state === 'failed')).toBe(false);

    sl.push(sl.dmEvent('after the big frame'));
    await waitFor(() => sl.texts('D0DM0001').includes('after the big frame'), 10_000);
    expect(d.daemon.status().channels.find((c) => c.id === 'sl')).toMatchObject({ state: 'connected', connection: 2 });
  });
});
