import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { FakeSlack } from '../../fakes/slack/server.js';
import { waitFor } from '../../helpers/daemon.js';

/** A raw Socket Mode client that keeps the envelopes it gets; `ack` acks one. */
async function socketClient(sl: FakeSlack) {
  const ws = new WebSocket(`${sl.url.replace('http', 'ws')}/link`);
  const got: string[] = [];
  ws.on('message', (raw) => {
    const frame = JSON.parse(String(raw)) as { envelope_id?: string };
    if (frame.envelope_id) got.push(frame.envelope_id);
  });
  await new Promise((r) => ws.once('open', r));
  return { ws, got, ack: (id: string) => ws.send(JSON.stringify({ envelope_id: id })) };
}

/**
 * Slack retries on another socket what a socket was given and did not ack. The fake once
 * sent again everything unacked whenever a socket opened or closed, so an envelope still out
 * on an open socket, or sent to the open one while the other was closing, arrived twice.
 */
describe('the fake Slack, spreading each envelope to one socket, retries only what a closed socket was given', () => {
  let sl: FakeSlack;
  const sockets: WebSocket[] = [];
  afterEach(async () => {
    for (const ws of sockets) ws.terminate();
    sockets.length = 0;
    await sl.close();
  });

  it('an envelope goes once to the socket that opened meanwhile or stayed open; the closed one’s unacked goes again', async () => {
    sl = new FakeSlack();
    await sl.start();
    sl.spread = 'one';
    const first = await socketClient(sl);
    sockets.push(first.ws);
    const leftUnacked = sl.push(sl.dmEvent('to the first socket'));
    await waitFor(() => first.got.includes(leftUnacked));
    // A socket opening does not get what another open socket was given and may still ack.
    const second = await socketClient(sl);
    sockets.push(second.ws);
    await waitFor(() => sl.openSockets.length === 2);
    expect(sl.sentEnvelopes.filter((e) => e.socket === 2)).toEqual([]);

    // The first socket starts closing and stops reading: Slack sees it closing, not closed.
    first.ws.close();
    (first.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    await waitFor(() => !sl.openSockets.includes(1));
    const whileClosing = sl.push(sl.dmEvent('while the first closes'));
    await waitFor(() => second.got.includes(whileClosing));
    // Not acked yet when the first socket's close is seen.
    first.ws.terminate();
    await waitFor(() => sl.socketLog.some((e) => e.socket === 1 && e.event === 'close'));
    await waitFor(() => second.got.includes(leftUnacked));
    for (const id of new Set(second.got)) second.ack(id);
    await waitFor(() => sl.unacked === 0);
    expect(second.got.filter((id) => id === whileClosing)).toHaveLength(1);
    expect(second.got.filter((id) => id === leftUnacked)).toHaveLength(1);
  });
});
