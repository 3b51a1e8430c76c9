import { xml } from '@xmpp/client';
import { describe, expect, it } from 'vitest';
import { NS_CORRECT, NS_DELAY, NS_STANZA_ID, normalizeMessage } from '../../../channels/xmpp/normalize.js';
import { configProblems } from '../../helpers/config.js';

const problems = (source: string) => configProblems(source);

describe('XMPP config', () => {
  it('names a bad jid, server or room with file:line:col, and a missing password', () => {
    const src = '[[channels]]\nid = "x"\ntype = "xmpp"\nallow_from = ["*"]\njid = "nobody"\nserver = "host"\nrooms = ["room"]\n';
    expect(problems(src)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^daemon\.config\.toml:5:7: channels\[0\]\.jid: write a bare JID/),
        expect.stringMatching(/^daemon\.config\.toml:6:10: channels\[0\]\.server: write host:port/),
        expect.stringMatching(/^daemon\.config\.toml:7:9: channels\[0\]\.rooms\[0\]: write room@conference/),
      ]),
    );
    expect(problems('[[channels]]\nid = "x"\ntype = "xmpp"\nallow_from = ["*"]\njid = "bot@example.org"\n')).toEqual([
      'daemon.config.toml:1:1: channels[0]: channel "x" needs password_env, or password_file, or password_credential',
    ]);
  });
});

describe('XMPP messages', () => {
  const id = {
    channelId: 'x',
    self: 'bot@example.org',
    rooms: new Map([['room@muc.example.org', 'helper']]),
    realJid: (o: string) => (o === 'room@muc.example.org/al' ? 'al@example.org' : undefined),
  };
  const msg = (attrs: Record<string, string>, ...children: ReturnType<typeof xml>[]) => xml('message', attrs, ...children);

  it('a chat message from a person: a DM keyed by their bare JID and the stanza id', () => {
    expect(normalizeMessage(msg({ from: 'Al@Example.org/phone', type: 'chat', id: 'a1' }, xml('body', {}, 'hi')), id)).toMatchObject({
      messageId: 'al@example.org:a1',
      chat: { id: 'al@example.org', type: 'dm' },
      sender: { id: 'al@example.org' },
      addressed: true,
    });
  });

  it('in a room: the real JID where shown, the room stanza-id, mention gating and the nick taken off', () => {
    const m = normalizeMessage(
      msg(
        { from: 'room@muc.example.org/al', type: 'groupchat', id: 'c1' },
        xml('body', {}, 'helper: hi'),
        xml('stanza-id', { xmlns: NS_STANZA_ID, by: 'room@muc.example.org', id: 's9' }),
      ),
      id,
    );
    expect(m).toMatchObject({
      messageId: 'room@muc.example.org:s9',
      chat: { type: 'group' },
      sender: { id: 'al@example.org', name: 'al' },
      text: 'hi',
      addressed: true,
    });
    const other = normalizeMessage(msg({ from: 'room@muc.example.org/bo', type: 'groupchat' }, xml('body', {}, 'helpers are nice')), id);
    expect(other).toMatchObject({ sender: { id: 'room@muc.example.org/bo' }, addressed: false });
  });

  it('room history, our own echo, corrections, chat states, other rooms and room PMs are not messages', () => {
    const none = [
      msg({ from: 'room@muc.example.org/al', type: 'groupchat' }, xml('body', {}, 'old'), xml('delay', { xmlns: NS_DELAY, stamp: '2020-01-01T00:00:00Z' })),
      msg({ from: 'room@muc.example.org/helper', type: 'groupchat' }, xml('body', {}, 'mine')),
      msg({ from: 'al@example.org/phone', type: 'chat' }, xml('body', {}, 'fixed'), xml('replace', { xmlns: NS_CORRECT, id: 'a1' })),
      msg({ from: 'al@example.org/phone', type: 'chat' }, xml('composing', { xmlns: 'http://jabber.org/protocol/chatstates' })),
      msg({ from: 'other@muc.example.org/al', type: 'groupchat' }, xml('body', {}, 'hi')),
      msg({ from: 'room@muc.example.org/al', type: 'chat' }, xml('body', {}, 'psst')),
      msg({ from: 'al@example.org/phone', type: 'error' }, xml('body', {}, 'bounced')),
    ];
    for (const st of none) expect(normalizeMessage(st, id)).toBeUndefined();
  });

  it('a delayed room message is history only where the room (or no one) says it delayed it', () => {
    const delay = (from?: string) => xml('delay', { xmlns: NS_DELAY, stamp: '2020-01-01T00:00:00Z', from });
    const said = (...delays: ReturnType<typeof xml>[]) =>
      normalizeMessage(msg({ from: 'room@muc.example.org/al', type: 'groupchat', id: 'd1' }, xml('body', {}, 'helper: hi'), ...delays), id);
    // History: the room's own stamp (XEP-0045), its service's, one without a from, and a
    // history message the server held for a resumed session (its stamp added to the room's).
    for (const history of [
      said(delay('room@muc.example.org')),
      said(delay('Room@MUC.example.org')),
      said(delay('muc.example.org')),
      said(delay()),
      said(delay('room@muc.example.org'), delay('bot@example.org')),
      said(delay('bot@example.org'), delay('room@muc.example.org')),
    ])
      expect(history).toBeUndefined();
    // Live messages that came late: queued for a resumed session by our server's stream
    // management (stamped with our JID), or resent from a sender client's own queue.
    expect(said(delay('bot@example.org'))).toMatchObject({ text: 'hi', addressed: true, chat: { id: 'room@muc.example.org', type: 'group' } });
    expect(said(delay('al@example.org/phone'))).toMatchObject({ text: 'hi', addressed: true });
  });
});
