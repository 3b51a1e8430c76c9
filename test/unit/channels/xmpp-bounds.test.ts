import { type Element, xml } from '@xmpp/client';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { MAX_STANZA_BYTES, MAX_STANZA_DEPTH } from '../../../channels/xmpp/bounds.js';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import { waitFor } from '../../helpers/daemon.js';
import { type Prosody, prosodyMissing, startProsody, xmppAdapterOn, xmppUserOn } from '../../helpers/xmpp.js';

const PASSWORD = 'pw-bounds-1';

/** `depth` elements, each inside the one before. */
const nested = (depth: number): Element => {
  let el = xml('leaf', { xmlns: 'urn:example:deep' });
  for (let i = 1; i < depth; i++) el = xml('x', { xmlns: 'urn:example:deep' }, el);
  return el;
};

describe.skipIf(prosodyMissing !== undefined)(`XMPP stanza bounds against a real Prosody${prosodyMissing ? ` (skipped: ${prosodyMissing})` : ''}`, () => {
  let server: Prosody;
  beforeAll(async () => {
    // Prosody relays up to 8 MiB: what acts on an oversized stanza is channeld's bound, not the server's.
    server = await startProsody({ stanzaSizeLimitBytes: 8 * 1024 * 1024 });
  });
  afterAll(async () => {
    await server?.stop();
  });

  const user = (local: string) => xmppUserOn(server, local, PASSWORD);

  /** The channel's adapter listening as `local`, with what it delivers, logs and reports. */
  const bot = async (local: string) => {
    const logs: Array<{ level: number; msg: string; reason?: string }> = [];
    const adapter = xmppAdapterOn(server, local, PASSWORD, logs);
    const delivered: ChannelMessage[] = [];
    const reconnecting: string[] = [];
    let connected = 0;
    const stop = new AbortController();
    const listening = adapter.listen(
      async (m) => (delivered.push(m), true),
      stop.signal,
      () => connected++,
      (reason) => reconnecting.push(reason),
    );
    onTestFinished(async () => {
      stop.abort();
      await listening.catch(() => {});
    });
    await waitFor(() => connected === 1, 15_000);
    return {
      jid: `${local}@${server.domain}`,
      delivered,
      texts: () => delivered.map((m) => m.text),
      reconnecting,
      connections: () => connected,
      overruns: () => logs.filter((l) => l.msg.startsWith('XMPP stanza past the bounds')),
    };
  };

  const closedByUs = () => server.log.join('').match(/Session closed by remote with error: policy-violation[^\n]*/g) ?? [];

  it('a message past 1 MiB ends the connection with policy-violation and a logged reason; it reconnects, and messages before and after arrive', async () => {
    const alice = await user('alice1');
    const b = await bot('bot1');
    // Larger than one socket read (64 KiB) and than Prosody's default limit, well under ours.
    const large = 'l'.repeat(600 * 1024);
    alice.say(b.jid, 'before');
    await alice.x.send(xml('message', { to: b.jid, type: 'chat', id: 'large' }, xml('body', {}, large)));
    await waitFor(() => b.delivered.length === 2, 15_000);
    expect(b.texts()).toEqual(['before', large]);

    const policyErrors = closedByUs().length;
    const huge = 'h'.repeat(MAX_STANZA_BYTES + 256 * 1024);
    await alice.x.send(xml('message', { to: b.jid, type: 'chat', id: 'huge' }, xml('body', {}, huge)));
    await waitFor(() => b.connections() === 2 || b.delivered.length > 2, 20_000);
    expect(b.texts().map((t) => t.length)).toEqual([6, large.length]);
    await waitFor(() => b.connections() === 2, 20_000);
    expect(b.overruns()).toEqual([
      expect.objectContaining({ level: 40, reason: `XMPP: the server sent more than ${MAX_STANZA_BYTES} bytes of one <message> without ending it` }),
    ]);
    expect(b.reconnecting[0]).toContain(`more than ${MAX_STANZA_BYTES} bytes of one <message>`);
    // The server got the stream error, with the reason as its text.
    expect(closedByUs().slice(policyErrors)).toEqual([expect.stringContaining(`more than ${MAX_STANZA_BYTES} bytes`)]);

    alice.say(b.jid, 'after');
    await waitFor(() => b.texts().includes('after'), 15_000);
    // The oversized stanza was acknowledged as handled: the server neither kept it offline
    // nor gave it again, so there was no second overrun and no third connection.
    expect(b.texts()).toEqual(['before', large, 'after']);
    expect(b.overruns()).toHaveLength(1);
    expect(b.connections()).toBe(2);
  });

  it(`a message nesting elements deeper than ${MAX_STANZA_DEPTH} levels ends the connection the same way`, async () => {
    const bea = await user('bea1');
    const b = await bot('bot2');
    // At the bound: delivered.
    await bea.x.send(xml('message', { to: b.jid, type: 'chat', id: 'ok' }, xml('body', {}, 'at the bound'), nested(MAX_STANZA_DEPTH - 1)));
    await waitFor(() => b.delivered.length === 1, 15_000);

    await bea.x.send(xml('message', { to: b.jid, type: 'chat', id: 'deep' }, xml('body', {}, 'too deep'), nested(MAX_STANZA_DEPTH * 2)));
    await waitFor(() => b.connections() === 2 || b.delivered.length > 1, 20_000);
    expect(b.texts()).toEqual(['at the bound']);
    expect(b.overruns()).toEqual([expect.objectContaining({ reason: `XMPP: a <message> nests elements deeper than ${MAX_STANZA_DEPTH} levels` })]);

    bea.say(b.jid, 'after');
    await waitFor(() => b.texts().includes('after'), 15_000);
    expect(b.texts()).toEqual(['at the bound', 'after']);
    expect(b.connections()).toBe(2);
  });
});
