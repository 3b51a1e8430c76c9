import type { Attachment, ChannelMessage } from '../../src/contracts/message.js';
import { contactsText, locationText, type WaLocation, type WaSharedContact } from './content.js';

/** A media object of an incoming message: the id is exchanged for a URL at download time. */
interface WaMedia {
  id: string;
  mime_type?: string;
  filename?: string;
  caption?: string;
  file_size?: number;
}

/** An error object WhatsApp attaches to a notification, a message or a status. */
export interface WaError {
  code?: number;
  title?: string;
  message?: string;
  error_data?: { details?: string };
}

/** One entry of `value.messages` in a `messages` webhook, as far as we read it. */
export interface WaMessage {
  /** The sender's phone number; left out when WhatsApp withholds it (a user with a username). */
  from?: string;
  /** The sender's business-scoped user id (BSUID), in every message webhook since 31 March 2026. */
  from_user_id?: string;
  id: string;
  timestamp?: string;
  type: string;
  group_id?: string;
  text?: { body?: string };
  image?: WaMedia;
  audio?: WaMedia;
  voice?: WaMedia;
  document?: WaMedia;
  video?: WaMedia;
  sticker?: WaMedia;
  location?: WaLocation;
  contacts?: WaSharedContact[];
  interactive?: { type?: string; button_reply?: { id?: string; title?: string }; list_reply?: { id?: string; title?: string } };
  button?: { payload?: string; text?: string };
  context?: { from?: string; id?: string };
  /** `type: "system"`: the user changed their number (`user_changed_number`) or their BSUID changed (`user_changed_user_id`). */
  system?: { type?: string; body?: string; wa_id?: string; user_id?: string; previous_user_id?: string };
  /** `type: "unsupported"`: what the user sent, which the Cloud API does not pass on. */
  unsupported?: { type?: string };
  errors?: WaError[];
}

/** A sender as `contacts[]` describes them: `wa_id` is left out when the number is withheld. */
interface WaContact {
  wa_id?: string;
  user_id?: string;
  profile?: { name?: string; username?: string };
}

/** One `changes[].value` of a `messages` webhook. */
export interface WaValue {
  messaging_product?: string;
  metadata?: { display_phone_number?: string; phone_number_id?: string };
  contacts?: WaContact[];
  messages?: WaMessage[];
  statuses?: WaStatus[];
  errors?: WaError[];
}

/** A status of a message we sent: sent, delivered, read, or failed with WhatsApp's errors. */
export interface WaStatus {
  id?: string;
  status?: string;
  recipient_id?: string;
  /** The recipient's BSUID; the only name of a user whose number is withheld. */
  recipient_user_id?: string;
  errors?: WaError[];
}

export interface WaWebhook {
  object?: string;
  entry?: Array<{ id?: string; changes?: Array<{ field?: string; value?: WaValue }> }>;
}

/** Who the bot is on WhatsApp: its number's id, and the number (digits) a mention names. */
export interface WaIdentity {
  phoneNumberId: string;
  number: string | undefined;
}

const MEDIA_TYPES = ['image', 'audio', 'voice', 'document', 'video', 'sticker'] as const;

const nonEmpty = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/**
 * Who sent `m`, as channeld names them (chat id of a DM, sender id, what `allow_from` lists):
 * the phone number when WhatsApp sends one, else the business-scoped user id. A user with
 * both keeps the conversation their number has always scoped (messages from before BSUIDs
 * existed carry only the number, and WhatsApp keeps sending it to a business the user talks
 * to); the BSUID names only users whose number WhatsApp withholds. The two are not linked
 * here: a user whose number WhatsApp starts or stops withholding continues under the other id.
 * Undefined when the message names neither.
 */
export function senderIdOf(m: WaMessage): string | undefined {
  return nonEmpty(m.from) ?? nonEmpty(m.from_user_id);
}

/**
 * A message naming no sender of its own, alone in its notification with one contact, is that
 * contact's: `contacts[]` describes the senders of `messages[]`, and with one of each there is
 * no doubt whose it is.
 */
function withContactIds(m: WaMessage, contacts: WaContact[], messageCount: number): WaMessage {
  if (senderIdOf(m) || messageCount !== 1 || contacts.length !== 1) return m;
  const phone = nonEmpty(contacts[0]!.wa_id);
  const bsuid = nonEmpty(contacts[0]!.user_id);
  return phone || bsuid ? { ...m, ...(phone ? { from: phone } : {}), ...(bsuid ? { from_user_id: bsuid } : {}) } : m;
}

/**
 * The messages of a webhook for this phone number; statuses (sent, delivered, read) and other
 * numbers' changes are not messages. A message naming no sender is returned too (the webhook
 * warns about it); one without an id or type is not a message.
 */
export function messagesOf(body: WaWebhook, me: WaIdentity): Array<{ message: WaMessage; name: string | undefined }> {
  if (body?.object !== 'whatsapp_business_account' || !Array.isArray(body.entry)) return [];
  const out: Array<{ message: WaMessage; name: string | undefined }> = [];
  for (const entry of body.entry) {
    for (const change of Array.isArray(entry?.changes) ? entry.changes : []) {
      const value = change?.value;
      if (change?.field !== 'messages' || !value || !Array.isArray(value.messages)) continue;
      if (value.metadata?.phone_number_id && value.metadata.phone_number_id !== me.phoneNumberId) continue;
      const contacts = (Array.isArray(value.contacts) ? value.contacts : []).filter((c): c is WaContact => Boolean(c) && typeof c === 'object');
      for (const raw of value.messages) {
        if (!raw || typeof raw.id !== 'string' || typeof raw.type !== 'string') continue;
        const m = withContactIds(raw, contacts, value.messages.length);
        const c = contacts.find((x) => (m.from && x.wa_id === m.from) || (m.from_user_id && x.user_id === m.from_user_id));
        out.push({ message: m, name: nonEmpty(c?.profile?.name) ?? nonEmpty(c?.profile?.username) });
      }
    }
  }
  return out;
}

/** The errors WhatsApp reports on a notification for this number itself (`value.errors`), not on one message. */
export function notificationErrorsOf(body: WaWebhook, me: WaIdentity): WaError[] {
  if (body?.object !== 'whatsapp_business_account' || !Array.isArray(body.entry)) return [];
  return body.entry.flatMap((entry) =>
    (Array.isArray(entry?.changes) ? entry.changes : []).flatMap((change) => {
      const value = change?.value;
      if (change?.field !== 'messages' || !value || !Array.isArray(value.errors)) return [];
      if (value.metadata?.phone_number_id && value.metadata.phone_number_id !== me.phoneNumberId) return [];
      return value.errors.filter((e) => e && typeof e === 'object');
    }),
  );
}

/** The failed statuses of a webhook: a message WhatsApp accepted and could not deliver after all. */
export function failedStatusesOf(body: WaWebhook, me: WaIdentity): WaStatus[] {
  if (body?.object !== 'whatsapp_business_account' || !Array.isArray(body.entry)) return [];
  return body.entry.flatMap((entry) =>
    (Array.isArray(entry?.changes) ? entry.changes : []).flatMap((change) => {
      const value = change?.value;
      if (change?.field !== 'messages' || !value || !Array.isArray(value.statuses)) return [];
      if (value.metadata?.phone_number_id && value.metadata.phone_number_id !== me.phoneNumberId) return [];
      return value.statuses.filter((st) => st?.status === 'failed');
    }),
  );
}

/**
 * The `messages` changes of a webhook for other phone numbers: one Meta app has one callback
 * URL, so every number of the app posts here unless it has a webhook override of its own.
 * Their messages are not this channel's to answer.
 */
export function foreignNumbersOf(body: WaWebhook, me: WaIdentity): Array<{ phoneNumberId: string; messages: number; statuses: number }> {
  if (body?.object !== 'whatsapp_business_account' || !Array.isArray(body.entry)) return [];
  return body.entry.flatMap((entry) =>
    (Array.isArray(entry?.changes) ? entry.changes : []).flatMap((change) => {
      const value = change?.value;
      const id = value?.metadata?.phone_number_id;
      if (change?.field !== 'messages' || typeof id !== 'string' || id === '' || id === me.phoneNumberId) return [];
      const count = (list: unknown) => (Array.isArray(list) ? list.length : 0);
      return [{ phoneNumberId: id, messages: count(value?.messages), statuses: count(value?.statuses) }];
    }),
  );
}

function attachmentOf(m: WaMessage): Attachment | undefined {
  for (const type of MEDIA_TYPES) {
    const media = m[type];
    if (media && typeof media.id === 'string')
      return {
        id: media.id,
        type,
        ...(media.filename ? { name: media.filename } : {}),
        ...(media.mime_type ? { mime: media.mime_type.split(';')[0]!.trim() } : {}),
        ...(typeof media.file_size === 'number' ? { size: media.file_size } : {}),
      };
  }
  return undefined;
}

/** What a location or contacts message says, as text; undefined for other types. */
function sharedText(m: WaMessage): string | undefined {
  if (m.type === 'location') return locationText(m.location);
  if (m.type === 'contacts') return contactsText(m.contacts);
  return undefined;
}

/**
 * An incoming WhatsApp message as a ChannelMessage; the `wamid` is its inbox key. A location
 * or shared contacts become text (content.ts). Undefined for a message naming no sender, and
 * for one with nothing to read (a reaction, an `unsupported` one, an empty text): nothing to answer.
 */
export function normalizeMessage(m: WaMessage, name: string | undefined, channelId: string, me: WaIdentity): ChannelMessage | undefined {
  const sender = senderIdOf(m);
  if (!sender) return undefined;
  const attachment = attachmentOf(m);
  // A reply button's id is the command we put there (`/approve 3fa9c1`): the click is that message.
  const button = m.interactive?.button_reply?.id ?? m.interactive?.list_reply?.id ?? m.button?.payload;
  let text = button ?? m.text?.body ?? (attachment ? (m[attachment.type as (typeof MEDIA_TYPES)[number]]?.caption ?? '') : (sharedText(m) ?? ''));
  const group = typeof m.group_id === 'string' && m.group_id !== '';
  const mention = me.number ? new RegExp(`@\\+?${me.number}\\b\\s*`, 'g') : undefined;
  const mentioned = mention ? mention.test(text) : false;
  if (mention) text = text.replace(mention, '');
  const repliedToBot = Boolean(m.context?.from && me.number && m.context.from.replace(/\D/g, '') === me.number);
  if (!text.trim() && !attachment) return undefined;
  const seconds = Number(m.timestamp);
  return {
    channelId,
    kind: 'whatsapp',
    messageId: m.id,
    chat: group ? { id: m.group_id!, type: 'group' } : { id: sender, type: 'dm' },
    sender: { id: sender, name: name ?? sender, isBot: false },
    text: text.trim(),
    attachments: attachment ? [attachment] : [],
    ...(m.context?.id ? { replyTo: m.context.id } : {}),
    addressed: !group || mentioned || repliedToBot || button !== undefined,
    receivedAt: Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : Date.now(),
  };
}
