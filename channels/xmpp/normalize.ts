import { randomUUID } from 'node:crypto';
import type { Element } from '@xmpp/client';
import type { ChannelMessage } from '../../src/contracts/message.js';

export const NS_MUC_USER = 'http://jabber.org/protocol/muc#user';
export const NS_DELAY = 'urn:xmpp:delay';
export const NS_CORRECT = 'urn:xmpp:message-correct:0';
export const NS_CHATSTATES = 'http://jabber.org/protocol/chatstates';
export const NS_STANZA_ID = 'urn:xmpp:sid:0';

export const bareOf = (jid: string) => jid.split('/')[0]!.toLowerCase();
export const resourceOf = (jid: string) => (jid.includes('/') ? jid.slice(jid.indexOf('/') + 1) : '');

export interface Identity {
  channelId: string;
  /** Our bare JID. */
  self: string;
  /** Joined rooms: bare room JID → our nick there. */
  rooms: ReadonlyMap<string, string>;
  /** A room occupant's real bare JID where the room shows it (non-anonymous rooms). */
  realJid(occupant: string): string | undefined;
}

function mentions(text: string, nick: string): { addressed: boolean; text: string } {
  const n = nick.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const lead = new RegExp(`^@?${n}[:,]?\\s+`, 'i');
  const anywhere = new RegExp(`(^|[^\\w-])@?${n}($|[^\\w-])`, 'i');
  return { addressed: anywhere.test(text), text: text.replace(lead, '') };
}

/**
 * Whether a room's message is its discussion history (sent on join) rather than a live
 * message that reached us late. Both carry a delay (XEP-0203), whose `from` is the entity
 * that delayed it: the room stamps its history with its own JID (XEP-0045 §7.2.15), while
 * what a resumed session gets again was queued by our server's stream management (XEP-0198;
 * Prosody's mod_smacks stamps it with our bare JID) and what a sender's client resent from
 * its own queue carries that client's JID. Those are live messages nobody answered yet:
 * dropped, they were lost. A delay with no `from` counts as history: nothing says it is not
 * the room's, and answering a room's backlog (again on every join) is worse than missing a
 * late message from a server that does not say who delayed it. Any one delay of the room's
 * makes it history: a history message held for a resumed session may carry a second delay,
 * the server's, besides the room's.
 */
function isRoomHistory(st: Element, room: string): boolean {
  const service = room.slice(room.indexOf('@') + 1);
  return st.getChildren('delay', NS_DELAY).some((d) => {
    const by = d.attrs.from;
    // The room itself, or its service (a server that stamps its own address): the room's side.
    return by === undefined || bareOf(by) === room || bareOf(by) === service;
  });
}

/**
 * A `<message>` with a body as a ChannelMessage, or undefined: no body (chat states),
 * errors, corrections (the first version was answered), our own messages, room history
 * (see isRoomHistory), rooms we did not join and private messages through a room.
 */
export function normalizeMessage(st: Element, id: Identity): ChannelMessage | undefined {
  const from = st.attrs.from;
  const body = st.getChildText('body');
  const type = st.attrs.type ?? 'normal';
  if (!from || body === null || !body.trim() || type === 'error' || st.getChild('replace', NS_CORRECT)) return undefined;
  const bare = bareOf(from);
  if (type === 'groupchat') {
    const nick = id.rooms.get(bare);
    const who = resourceOf(from);
    if (nick === undefined || !who || who === nick || isRoomHistory(st, bare)) return undefined;
    const stanzaId = st.getChildren('stanza-id', NS_STANZA_ID).find((s) => bareOf(s.attrs.by ?? '') === bare)?.attrs.id;
    const m = mentions(body, nick);
    return {
      channelId: id.channelId,
      kind: 'xmpp',
      messageId: `${bare}:${stanzaId ?? st.attrs.id ?? randomUUID()}`,
      chat: { id: bare, type: 'group' },
      sender: { id: id.realJid(from) ?? from, name: who, isBot: false },
      text: m.text,
      attachments: [],
      addressed: m.addressed,
      receivedAt: Date.now(),
    };
  }
  if (bare === id.self || id.rooms.has(bare)) return undefined;
  return {
    channelId: id.channelId,
    kind: 'xmpp',
    // A message kept offline while we were away comes again with its id: the inbox dedupes on it.
    messageId: `${bare}:${st.attrs.id ?? randomUUID()}`,
    chat: { id: bare, type: 'dm' },
    sender: { id: bare, name: bare.split('@')[0]!, isBot: false },
    text: body,
    attachments: [],
    addressed: true,
    receivedAt: Date.now(),
  };
}
