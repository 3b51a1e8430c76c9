import { randomBytes } from 'node:crypto';

/** The fake's default user: a phone number as WhatsApp sends it. */
export const DEFAULT_USER = '4915112345678';

/** A business-scoped user id as WhatsApp writes one (country code, period, letters and digits). */
export const BSUID = /^[A-Z]{2}\.(ENT\.)?[A-Za-z0-9]{1,128}$/;

/**
 * Who a message is from, as Meta's messages webhook names them: `from` is the phone number
 * (the default user unless given; `null` leaves it out, as WhatsApp does for a user with a
 * username whose number it withholds), `userId` the business-scoped user id (`from_user_id`,
 * in every message webhook since 31 March 2026).
 */
export interface WaFrom {
  from?: string | null;
  userId?: string;
  group?: string;
  contextId?: string;
  contextFrom?: string;
}

/** A `contacts[]` entry describing a sender: `wa_id` left out when the number is withheld. */
export interface WaSenderContact {
  wa_id?: string;
  user_id?: string;
  name: string;
  username?: string;
}

export const contactEntry = (c: WaSenderContact): Record<string, unknown> => ({
  profile: { name: c.name, ...(c.username ? { username: c.username } : {}) },
  ...(c.wa_id ? { wa_id: c.wa_id } : {}),
  ...(c.user_id ? { user_id: c.user_id } : {}),
});

/** An incoming message of `type` with its `content` fields, from `o`'s sender; `business` is the number a reply context names. */
export function incoming(type: string, content: Record<string, unknown>, o: WaFrom, business: string): Record<string, unknown> {
  const from = o.from === null ? undefined : (o.from ?? DEFAULT_USER);
  return {
    ...(from ? { from } : {}),
    ...(o.userId ? { from_user_id: o.userId } : {}),
    id: `wamid.IN${randomBytes(8).toString('hex')}`,
    timestamp: String(Math.floor(Date.now() / 1000)),
    type,
    ...content,
    ...(o.group ? { group_id: o.group } : {}),
    ...(o.contextId ? { context: { from: o.contextFrom ?? business, id: o.contextId } } : {}),
  };
}

/** A shared location (location messages webhook): coordinates, and a name and address when the user picked a place. */
export const locationContent = (l: { latitude: number; longitude: number; name?: string; address?: string }) => ({ location: l });

/** Shared contact cards (contacts messages webhook): a formatted name and phone numbers each. */
export const contactsContent = (cards: Array<{ name: string; phones?: string[] }>) => ({
  contacts: cards.map((c) => ({
    name: { formatted_name: c.name, first_name: c.name.split(' ')[0] },
    phones: (c.phones ?? []).map((phone) => ({ phone, type: 'CELL' })),
  })),
});

/** What the Cloud API passes on for a message type it does not support (unsupported messages webhook). */
export const unsupportedContent = (sentType: string) => ({
  unsupported: { type: sentType },
  errors: [
    { code: 131051, title: 'Message type unknown', message: 'Message type unknown', error_data: { details: 'Message type is currently not supported.' } },
  ],
});

/** A `user_changed_user_id` system message: the user's BSUID changed (system messages webhook; no contacts array). */
export const userIdChangedContent = (previous: string, next: string) => ({
  system: { type: 'user_changed_user_id', body: 'User changed their business-scoped user id', previous_user_id: previous, user_id: next },
});
