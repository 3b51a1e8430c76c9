import type { Attachment, ChannelMessage } from '../../src/contracts/message.js';

/** A media object of an incoming message: the id is exchanged for a URL at download time. */
interface WaMedia {
  id: string;
  mime_type?: string;
  filename?: string;
  caption?: string;
  file_size?: number;
}

/** One entry of `value.messages` in a `messages` webhook, as far as we read it. */
export interface WaMessage {
  from: string;
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
  interactive?: { type?: string; button_reply?: { id?: string; title?: string }; list_reply?: { id?: string; title?: string } };
  button?: { payload?: string; text?: string };
  context?: { from?: string; id?: string };
}

/** One `changes[].value` of a `messages` webhook. */
export interface WaValue {
  messaging_product?: string;
  metadata?: { display_phone_number?: string; phone_number_id?: string };
  contacts?: Array<{ wa_id?: string; profile?: { name?: string } }>;
  messages?: WaMessage[];
  statuses?: WaStatus[];
}

/** A status of a message we sent: sent, delivered, read, or failed with WhatsApp's errors. */
export interface WaStatus {
  id?: string;
  status?: string;
  recipient_id?: string;
  errors?: Array<{ code?: number; title?: string; message?: string; error_data?: { details?: string } }>;
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

/** The messages of a webhook for this phone number; statuses (sent, delivered, read) and other numbers' changes are not messages. */
export function messagesOf(body: WaWebhook, me: WaIdentity): Array<{ message: WaMessage; name: string | undefined }> {
  if (body?.object !== 'whatsapp_business_account' || !Array.isArray(body.entry)) return [];
  const out: Array<{ message: WaMessage; name: string | undefined }> = [];
  for (const entry of body.entry) {
    for (const change of Array.isArray(entry?.changes) ? entry.changes : []) {
      const value = change?.value;
      if (change?.field !== 'messages' || !value || !Array.isArray(value.messages)) continue;
      if (value.metadata?.phone_number_id && value.metadata.phone_number_id !== me.phoneNumberId) continue;
      const names = new Map((Array.isArray(value.contacts) ? value.contacts : []).map((c) => [c?.wa_id, c?.profile?.name]));
      for (const m of value.messages) {
        if (m && typeof m.id === 'string' && typeof m.from === 'string' && typeof m.type === 'string') out.push({ message: m, name: names.get(m.from) });
      }
    }
  }
  return out;
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

/**
 * An incoming WhatsApp message as a ChannelMessage; the `wamid` is its inbox key. Undefined
 * for a message with neither text nor a file (a reaction, a location, an `unsupported` one):
 * nothing to answer.
 */
export function normalizeMessage(m: WaMessage, name: string | undefined, channelId: string, me: WaIdentity): ChannelMessage | undefined {
  const attachment = attachmentOf(m);
  // A reply button's id is the command we put there (`/approve 3fa9c1`): the click is that message.
  const button = m.interactive?.button_reply?.id ?? m.interactive?.list_reply?.id ?? m.button?.payload;
  let text = button ?? m.text?.body ?? (attachment ? (m[attachment.type as (typeof MEDIA_TYPES)[number]]?.caption ?? '') : '');
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
    chat: group ? { id: m.group_id!, type: 'group' } : { id: m.from, type: 'dm' },
    sender: { id: m.from, name: name ?? m.from, isBot: false },
    text: text.trim(),
    attachments: attachment ? [attachment] : [],
    ...(m.context?.id ? { replyTo: m.context.id } : {}),
    addressed: !group || mentioned || repliedToBot || button !== undefined,
    receivedAt: Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : Date.now(),
  };
}
