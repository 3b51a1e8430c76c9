import { type Element, xml } from '@xmpp/client';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { XmppAdapter } from '../../../channels/xmpp/adapter.js';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import { TcpGate } from '../../fakes/tcp-gate.js';
import { waitFor } from '../../helpers/daemon.js';
import { type Prosody, prosodyMissing, startProsody, XmppUser } from '../../helpers/xmpp.js';

const PASSWORD = 'pw-rooms-1';
const NS_MUC_USER = 'http://jabber.org/protocol/muc#user';

interface LogLine {
  level: number;
  msg: string;
  room?: string;
  reason?: string;
}

/** A person on `server`, online, closed when the test ends. */
async function user(server: Prosody, local: string): Promise<XmppUser> {
  server.register(local, PASSWORD);
  const u = new XmppUser(local, server, PASSWORD, false);
  onTestFinished(() => u.close());
  return u.start();
}

/** The channel's adapter listening as `local` (nick "helper" in `rooms`), through `gate` where given. */
async function bot(server: Prosody, local: string, rooms: string[], gate?: TcpGate) {
  server.register(local, PASSWORD);
  const logs: LogLine[] = [];
  const log = pino({ level: 'info' }, { write: (s: string) => void logs.push(JSON.parse(s)) });
  const adapter = new XmppAdapter({
    id: 'xmpp',
    local,
    domain: server.domain,
    password: PASSWORD,
    service: `xmpp://127.0.0.1:${gate?.port ?? server.port}`,
    rooms: rooms.map((jid) => ({ jid, nick: 'helper' })),
    connectTimeoutMs: 10_000,
    log,
  });
  const delivered: ChannelMessage[] = [];
  let connected = 0;
  let ended: unknown;
  const stop = new AbortController();
  const listening = adapter.listen(
    async (m) => (delivered.push(m), true),
    stop.signal,
    () => connected++,
  );
  listening.then(
    () => (ended = 'returned'),
    (err: unknown) => (ended = err),
  );
  onTestFinished(async () => {
    stop.abort();
    await listening.catch(() => {});
  });
  await waitFor(() => connected === 1, 15_000);
  return {
    adapter,
    logs,
    delivered,
    texts: () => delivered.map((m) => m.text),
    /** New sessions ("online"); a resumed session is not one. */
    connections: () => connected,
    ended: () => ended,
    logged: (msg: string, room: string) => logs.filter((l) => l.msg === msg && l.room === room),
  };
}

/** The presence `u` got from `room`'s occupant `nick`, the last one that matches. */
const presenceOf = (u: XmppUser, room: string, nick: string, type?: string): Element | undefined =>
  u.stanzas.findLast((s) => s.is('presence') && s.attrs.from === `${room}/${nick}` && s.attrs.type === type);

describe.skipIf(prosodyMissing !== undefined)(`XMPP rooms against a real Prosody${prosodyMissing ? ` (skipped: ${prosodyMissing})` : ''}`, () => {
  let server: Prosody;
  beforeAll(async () => {
    server = await startProsody({ shell: true });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('a room message sent while the connection is down comes with the resumed session (stamped delayed by the server) and is delivered once', async () => {
    const gate = await new TcpGate().start('127.0.0.1', server.port);
    onTestFinished(() => gate.close());
    const room = `resume@${server.muc}`;
    const ann = await user(server, 'ann1');
    await ann.join(room, 'ann');
    const b = await bot(server, 'rbot1', [room], gate);
    await waitFor(() => presenceOf(ann, room, 'helper'), 10_000);
    ann.say(room, 'helper: before', 'groupchat');
    await waitFor(() => b.texts().includes('before'), 10_000);

    // The connection is cut, not closed: Prosody keeps the session (XEP-0198) and queues what
    // the room sends it, each stanza stamped with a delay from the bot's own JID.
    gate.down();
    ann.say(room, 'helper: while you were away', 'groupchat');
    // The room took it: its copy came back to the sender.
    await waitFor(() => ann.from(room).some((r) => r.body === 'helper: while you were away'), 10_000);
    gate.up();
    await waitFor(() => b.texts().includes('while you were away'), 20_000);
    ann.say(room, 'helper: after', 'groupchat');
    await waitFor(() => b.texts().includes('after'), 10_000);

    expect(b.texts()).toEqual(['before', 'while you were away', 'after']);
    expect(b.delivered[1]).toMatchObject({ chat: { id: room, type: 'group' }, addressed: true, sender: { id: 'ann1@localhost' } });
    // Resumed: the same session, so no new "online" (and no rejoin with the room's history).
    expect(b.connections()).toBe(1);
  });

  it('removed from a room because a stanza to it bounced (333): warned with the room and reason, rejoined, and answering there again', async () => {
    const room = `bounce@${server.muc}`;
    const cy = await user(server, 'cy1');
    await cy.join(room, 'cy');
    const b = await bot(server, 'rbot2', [room]);
    const joined = await waitFor(() => presenceOf(cy, room, 'helper'), 10_000);
    cy.say(room, 'helper: first', 'groupchat');
    await waitFor(() => b.texts().includes('first'), 10_000);

    // What Prosody's stream management does with what it could not deliver to a session that
    // ended (mod_smacks handle_unacked_stanzas): the room's message to the bot comes back to
    // the room as an error from the bot's address, and the room removes the bot (333).
    const full = joined.getChild('x', NS_MUC_USER)?.getChild('item')?.attrs.jid;
    expect(full).toMatch(/^rbot2@localhost\/channeld-/);
    server.shell(
      `local st = require "util.stanza"; prosody.core_post_stanza(prosody.hosts["localhost"], st.error_reply(st.message({ from = "${room}/cy", to = "${full}", type = "groupchat", id = "b1" }), "cancel", "recipient-unavailable"))`,
    );

    const removed = await waitFor(() => b.logged('XMPP removed from a room; rejoining', room)[0], 10_000);
    expect(removed).toMatchObject({ level: 40, reason: expect.stringMatching(/status 333.*recipient unavailable/i) });
    // Out and back in, as the others in the room see it.
    await waitFor(() => presenceOf(cy, room, 'helper', 'unavailable'), 10_000);
    await waitFor(() => b.logged('XMPP room joined', room).length === 2, 15_000);
    cy.say(room, 'helper: second', 'groupchat');
    await waitFor(() => b.texts().includes('second'), 10_000);
    // The room's history on the rejoin (it holds "first") is not delivered again.
    expect(b.texts()).toEqual(['first', 'second']);
    expect(b.adapter.notes()).toEqual([]);
    expect(b.ended()).toBeUndefined();
  });

  it('a kick (307) still ends the listener with CHANNEL_KICKED, after a warning naming the room and the reason', async () => {
    const room = `kick@${server.muc}`;
    const gus = await user(server, 'gus1');
    await gus.join(room, 'gus');
    const b = await bot(server, 'rbot4', [room]);
    await waitFor(() => presenceOf(gus, room, 'helper'), 10_000);
    await gus.x.send(
      xml(
        'iq',
        { type: 'set', to: room, id: 'kick1' },
        xml('query', { xmlns: 'http://jabber.org/protocol/muc#admin' }, xml('item', { nick: 'helper', role: 'none' }, xml('reason', {}, 'go away'))),
      ),
    );
    const err = await waitFor(() => b.ended(), 10_000);
    expect(err).toMatchObject({ code: 'CHANNEL_KICKED', retryable: false, message: expect.stringContaining('go away') });
    expect(b.logged('XMPP removed from a room: kicked', room)).toEqual([expect.objectContaining({ level: 40, reason: 'go away' })]);
  });

  it('a destroyed room: an error names the room and the reason, /status notes it, and the channel goes on', async () => {
    const room = `gone@${server.muc}`;
    const dee = await user(server, 'dee1');
    // The first in the room owns it.
    await dee.join(room, 'dee');
    const b = await bot(server, 'rbot3', [room]);
    await waitFor(() => presenceOf(dee, room, 'helper'), 10_000);
    await dee.x.send(
      xml(
        'iq',
        { type: 'set', to: room, id: 'destroy1' },
        xml('query', { xmlns: 'http://jabber.org/protocol/muc#owner' }, xml('destroy', {}, xml('reason', {}, 'closing up'))),
      ),
    );
    const left = await waitFor(() => b.logged('XMPP out of a room: not rejoining until the channel restarts', room)[0], 10_000);
    expect(left).toMatchObject({ level: 50, reason: 'the room was destroyed (closing up)' });
    expect(b.adapter.notes()).toEqual([`not in room ${room}: the room was destroyed (closing up); not rejoined until the channel restarts`]);
    // One-to-one chats still work.
    dee.say('rbot3@localhost', 'still there?');
    await waitFor(() => b.texts().includes('still there?'), 10_000);
    expect(b.logged('XMPP room joined', room)).toHaveLength(1);
    expect(b.ended()).toBeUndefined();
  });
});

describe.skipIf(prosodyMissing !== undefined)(
  `XMPP room joins refused for now, against a real Prosody${prosodyMissing ? ` (skipped: ${prosodyMissing})` : ''}`,
  () => {
    let server: Prosody;
    beforeAll(async () => {
      // One room at most: a second is refused with resource-constraint, type wait.
      server = await startProsody({ mucMaxRooms: 1 });
    });
    afterAll(async () => {
      await server?.stop();
    });

    it('a join refused with an error of type wait is tried again after a backoff, without stopping the channel, and the room is answered once in', async () => {
      const eli = await user(server, 'eli1');
      const other = `first@${server.muc}`;
      await eli.join(other, 'eli');
      const room = `second@${server.muc}`;
      const b = await bot(server, 'wbot1', [room]);

      const refused = await waitFor(() => b.logged('XMPP room not joined; trying again', room)[0], 10_000);
      expect(refused).toMatchObject({ level: 40, reason: 'the room refused the join for now (resource-constraint, type wait)' });
      expect(b.ended()).toBeUndefined();

      // The only room empties, and Prosody lets it go: the next attempt gets in.
      await eli.x.send(xml('presence', { to: `${other}/eli`, type: 'unavailable' }));
      await waitFor(() => b.logged('XMPP room joined', room).length === 1, 20_000);
      await eli.join(room, 'eli');
      eli.say(room, 'helper: made it', 'groupchat');
      await waitFor(() => b.texts().includes('made it'), 10_000);
      expect(b.texts()).toEqual(['made it']);
      expect(b.connections()).toBe(1);
      expect(b.ended()).toBeUndefined();
    });
  },
);
