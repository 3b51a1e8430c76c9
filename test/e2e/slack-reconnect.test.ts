import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ChannelError } from '../../src/contracts/errors.js';
import { settleWithin } from '../../src/util/abortable.js';
import { FakeSlack, type SlackFault } from '../fakes/slack/server.js';
import { waitFor } from '../helpers/daemon.js';
import { withChannelDaemon } from '../helpers/fixtures.js';
import { slackAdapterOn, slackChannel, slackEnv, withSlack } from '../helpers/platforms.js';
import { scaled } from '../helpers/timing.js';
import { echoAgent } from '../helpers/toml.js';

/** The pause cap these tests give the adapter, so a capped back-off shows within seconds. */
const CAP_MS = 250;

describe('Slack Socket Mode: reconnects after the first connect', () => {
  let sl: FakeSlack;
  const unhandled: unknown[] = [];
  const record = (reason: unknown) => void unhandled.push(reason);
  beforeEach(async () => {
    sl = new FakeSlack();
    await sl.start();
    unhandled.length = 0;
    process.on('unhandledRejection', record);
  });
  afterEach(async () => {
    process.off('unhandledRejection', record);
    await sl.close();
  });

  /** As the daemon builds channel "sl" (Socket Mode), with the app token and the short cap. */
  const adapter = () => slackAdapterOn(sl, { listens: true, reconnectMaxDelayMs: CAP_MS });

  /** listen() on `a` until it settles: how often it connected and how it ended ('resolved', or its error). */
  function listen(signal: AbortSignal) {
    const state: { connects: number; outcome?: unknown } = { connects: 0 };
    const run = adapter()
      .listen(
        async () => true,
        signal,
        () => void state.connects++,
      )
      .then(
        () => void (state.outcome = 'resolved'),
        (err: unknown) => void (state.outcome = err),
      );
    return { state, run };
  }

  /** listen() connected, then Slack asks for a reconnect while apps.connections.open fails `times` with `fault`. */
  async function connectedThen(fault: SlackFault, times: number) {
    const stop = new AbortController();
    const { state, run } = listen(stop.signal);
    await waitFor(() => state.connects === 1, 10_000);
    sl.fail('apps.connections.open', fault, times);
    sl.disconnect();
    return { stop, state, run };
  }

  // The SDK reconnects by itself and ran its connect with no catch: a refused app token threw
  // out of its timer (an unhandled rejection ends the process) while listen() waited forever,
  // so the channel was never parked. token_revoked the SDK even retried forever.
  for (const error of ['invalid_auth', 'token_revoked']) {
    it(`apps.connections.open refused with ${error} on a reconnect: listen rejects with CHANNEL_AUTH_FAILED, nothing unhandled`, async () => {
      const { stop, state, run } = await connectedThen({ error }, 5);
      // The SDK pauses 5 s before it reconnects.
      expect(await settleWithin(run, scaled(20_000))).toBe(true);
      expect(state.outcome).toBeInstanceOf(ChannelError);
      expect(state.outcome).toMatchObject({ code: 'CHANNEL_AUTH_FAILED', retryable: false, message: expect.stringContaining(error) });
      expect(unhandled).toEqual([]);
      // No second refused connect: it ended at the first.
      expect(sl.callsOf('apps.connections.open')).toHaveLength(2);
      stop.abort();
    });
  }

  // Without a ceiling the SDK's retries of apps.connections.open wait 1.3 times longer each
  // time (about an hour between attempts after a long outage).
  it('apps.connections.open failing with 502 ten times: no pause between attempts over the cap, then connected again', async () => {
    const { stop, state, run } = await connectedThen({ status: 502 }, 10);
    await waitFor(() => state.connects === 2, 15_000);
    const at = sl.callsOf('apps.connections.open').map((c) => c.at);
    expect(at).toHaveLength(12);
    // From the first failed attempt (after the SDK's 5 s pause) to the one that connected.
    const gaps = at.slice(2).map((t, i) => t - at[i + 1]!);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(scaled(CAP_MS + 1750));
    stop.abort();
    await run;
    expect(unhandled).toEqual([]);
  });

  /** Stops the listener while apps.connections.open keeps failing: it returns at once, and calls nothing more. */
  async function stopDuringOutage(stop: AbortController, run: Promise<void>): Promise<void> {
    await waitFor(() => sl.callsOf('apps.connections.open').length >= 3, 15_000);
    stop.abort();
    expect(await settleWithin(run, scaled(3000))).toBe(true);
    const calls = sl.callsOf('apps.connections.open').length;
    // Ten capped pauses, and longer than the SDK's own next pause: its retries would have called again by now.
    await expect(waitFor(() => sl.callsOf('apps.connections.open').length > calls, 10 * CAP_MS)).rejects.toThrow(/timed out/);
    expect(unhandled).toEqual([]);
  }

  // listen() waited on the SDK's start, which retries (for hours) during an outage: a stop or
  // reload hung until then, and the retries went on, connecting a socket nobody listened on.
  it('a stop while the first connect is failing returns at once, and nothing connects after it', async () => {
    sl.fail('apps.connections.open', { status: 502 }, 1000);
    const stop = new AbortController();
    const { state, run } = listen(stop.signal);
    await stopDuringOutage(stop, run);
    expect(state).toEqual({ connects: 0, outcome: 'resolved' });
    expect(sl.connections).toBe(0);
  });

  it('a stop while a reconnect is failing returns at once, and nothing connects after it', async () => {
    const { stop, state, run } = await connectedThen({ status: 502 }, 1000);
    await stopDuringOutage(stop, run);
    expect(state).toEqual({ connects: 1, outcome: 'resolved' });
    expect(sl.connections).toBe(1);
  });
});

describe('Slack: a token revoked while the daemon runs', () => {
  it('parks the channel as failed (the daemon keeps running)', async () => {
    const sl = await withSlack();
    const d = await withChannelDaemon(echoAgent(0) + slackChannel(sl, 'native_stream = false\n'), slackEnv(sl));
    const channel = () => d.daemon.status().channels.find((c) => c.id === 'sl');
    await waitFor(() => channel()?.state === 'connected', 10_000);
    sl.fail('apps.connections.open', { error: 'token_revoked' }, 100);
    sl.disconnect();
    await waitFor(() => channel()?.state === 'failed', 20_000);
    expect(channel()?.last_error).toMatchObject({ code: 'CHANNEL_AUTH_FAILED', message: expect.stringContaining('token_revoked') });
  });
});
