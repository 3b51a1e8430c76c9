import { type Element, xml } from '@xmpp/client';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import { TcpGate } from '../../fakes/tcp-gate.js';
import { waitFor } from '../../helpers/daemon.js';
import { type Prosody, prosodyMissing, startProsody, type XmppUser, xmppAdapterOn, xmppUserOn } from '../../helpers/xmpp.js';

const PASSWORD = 'pw-rooms-1';
const NS_MUC_USER = 'http://jabber.org/protocol/muc#user';

interface LogLine {
  level: number;
  msg: string;
  room?: string;
  reason?: string;
}

/** A person on `server`, online, closed when the test ends. */
const user = (server: Prosody, local: string): Promise<XmppUser> => xmppUserOn(server, local, PASSWORD);

/** The channel's adapter listening as `local` (nick "helper" in `rooms`), through `gate` where given. */
async function bot(server: Prosody, local: string, rooms: string[], gate?: TcpGate) {
  const logs: LogLine[] = [];
  const adapter = xmppAdapterOn(server, local, PASSWORD, logs, { rooms, port: gate?.port });
  const delivered: ChannelMessage[] = [];
  let connected = 0;
  let ended: unknown;
  let stop = new AbortController();
  let listening: Promise<void> = Promise.resolve();
  /** One run of the listener, as the supervisor starts it. */
  const run = async () => {
    stop = new AbortController();
    ended = undefined;
    const before = connected;
    listening = adapter.listen(
      async (m) => (delivered.push(m), true),
      stop.signal,
      () => connected++,
    );
    listening.then(
      () => (ended = 'returned'),
      (err: unknown) => (ended = err),
    );
    await waitFor(() => connected === before + 1 || ended, 15_000);
  };
  onTestFinished(async () => {
    stop.abort();
    await listening.catch(() => {});
  });
  await run();
  return {
    adapter,
    logs,
    delivered,
    texts: () => delivered.map((m) => m.text),
    /** New sessions ("online"); a resumed session is not one. */
    connections: () => connected,
    ended: () => ended,
    logged: (msg: string, room: string) => logs.filter((l) => l.msg === msg && l.room === room),
    /**
     * The run ends, `meanwhile` runs, and a new run starts on the same adapter: what the
     * supervisor does when a listener ends with a retryable error (its backoff in between).
     */
    relisten: async (meanwhile?: () => Promise<void>) => {
      stop.abort();
      await listening;
      await meanwhile?.();
      await run();
    },
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

/** `owner` makes `room` members-only (XEP-0045 §10.2): occupants who are not members are removed with 322. */
async function membersOnly(owner: XmppUser, room: string): Promise<void> {
  const id = `cfg-${Math.random().toString(36).slice(2)}`;
  await owner.x.send(
    xml(
      'iq',
      { type: 'set', to: room, id },
      xml(
        'query',
        { xmlns: 'http://jabber.org/protocol/muc#owner' },
        xml(
          'x',
          { xmlns: 'jabber:x:data', type: 'submit' },
          xml('field', { var: 'FORM_TYPE' }, xml('value', {}, 'http://jabber.org/protocol/muc#roomconfig')),
          xml('field', { var: 'muc#roomconfig_membersonly' }, xml('value', {}, '1')),
        ),
      ),
    ),
  );
  await waitFor(() => owner.stanzas.find((s) => s.is('iq') && s.attrs.id === id && s.attrs.type === 'result'), 10_000);
}

/**
 * The bot writes to `u`, who answers: once the bot has the answer it has also had every answer
 * to what it sent before (its room joins), which the server wrote to its stream first.
 */
async function roundTrip(b: Awaited<ReturnType<typeof bot>>, u: XmppUser, text: string): Promise<void> {
  const signal = AbortSignal.timeout(10_000);
  await b.adapter.send({ channelId: 'xmpp', chatId: u.jid, chatType: 'dm' }, `${text}?`, { signal });
  await waitFor(() => u.from(b.adapter.selfId!).some((r) => r.body === `${text}?`), 10_000);
  u.say(b.adapter.selfId!, `${text}!`);
  await waitFor(() => b.texts().includes(`${text}!`), 10_000);
}

describe.skipIf(prosodyMissing !== undefined)(
  `XMPP rooms left, across runs of the listener, against a real Prosody${prosodyMissing ? ` (skipped: ${prosodyMissing})` : ''}`,
  () => {
    let server: Prosody;
    beforeAll(async () => {
      server = await startProsody();
    });
    afterAll(async () => {
      await server?.stop();
    });

    it('a room left (322, destroyed) stays left when the listener runs again on the same adapter: not joined, still in /status, the channel goes on', async () => {
      const closed = `closed@${server.muc}`;
      const gone = `gone@${server.muc}`;
      const fay = await user(server, 'fay1');
      await fay.join(closed, 'fay');
      await fay.join(gone, 'fay');
      const b = await bot(server, 'lbot1', [closed, gone]);
      await waitFor(() => presenceOf(fay, closed, 'helper') && presenceOf(fay, gone, 'helper'), 10_000);

      await membersOnly(fay, closed);
      await fay.x.send(
        xml(
          'iq',
          { type: 'set', to: gone, id: 'destroy2' },
          xml('query', { xmlns: 'http://jabber.org/protocol/muc#owner' }, xml('destroy', {}, xml('reason', {}, 'done'))),
        ),
      );
      const left = 'XMPP out of a room: not rejoining until the channel restarts';
      await waitFor(() => b.logged(left, closed).length === 1 && b.logged(left, gone).length === 1, 10_000);
      const notes = [
        `not in room ${closed}: the room became members-only and the bot is not a member (status 322: no reason given); not rejoined until the channel restarts`,
        `not in room ${gone}: the room was destroyed (done); not rejoined until the channel restarts`,
      ];
      expect(b.adapter.notes()).toEqual(notes);

      // The listener ends and the supervisor starts it again; between the two, /status still says so.
      await b.relisten(async () => expect(b.adapter.notes()).toEqual(notes));
      await roundTrip(b, fay, 'still there');
      expect(b.ended()).toBeUndefined();
      // Neither room joined again: the members-only one would refuse (and stop the channel), the destroyed one would be created anew.
      expect(b.logged('XMPP room joined', closed)).toHaveLength(1);
      expect(b.logged('XMPP room joined', gone)).toHaveLength(1);
      expect(b.adapter.notes()).toEqual(notes);
      expect(b.connections()).toBe(2);
    });

    it('a room joined in an earlier run that refuses the bot now is left, not a reason to stop the channel', async () => {
      const room = `changed@${server.muc}`;
      const gil = await user(server, 'gil1');
      await gil.join(room, 'gil');
      const b = await bot(server, 'lbot2', [room]);
      await waitFor(() => presenceOf(gil, room, 'helper'), 10_000);

      // While the bot is out (between two runs of the listener), the room becomes members-only.
      await b.relisten(async () => {
        await waitFor(() => presenceOf(gil, room, 'helper', 'unavailable'), 10_000);
        await membersOnly(gil, room);
      });
      await roundTrip(b, gil, 'hello');
      expect(b.ended()).toBeUndefined();
      const left = await waitFor(() => b.logged('XMPP out of a room: not rejoining until the channel restarts', room)[0], 10_000);
      expect(left).toMatchObject({ level: 50, reason: 'the rejoin was refused (registration-required, type auth)' });
      expect(b.adapter.notes()).toEqual([
        `not in room ${room}: the rejoin was refused (registration-required, type auth); not rejoined until the channel restarts`,
      ]);
    });
  },
);
