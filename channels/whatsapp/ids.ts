/**
 * How WhatsApp names a user. A phone number (`wa_id`, `from`) is digits with the country code
 * and no "+". A business-scoped user id (BSUID, `user_id`, `from_user_id`) is a two-letter ISO
 * 3166 country code, a period and up to 128 letters and digits (`US.13491208655302741918`);
 * Meta gives every user one per business portfolio, and it is all a business learns of a user
 * who adopted a username and whose phone number WhatsApp withholds. A parent BSUID, shared
 * across linked portfolios, has `ENT.` after the country code (`US.ENT.11815799212886844830`).
 */
export const BSUID_FORM = /^[A-Z]{2}\.[A-Za-z0-9]{1,128}$/;
export const PARENT_BSUID_FORM = /^[A-Z]{2}\.ENT\.[A-Za-z0-9]{1,128}$/;
/** A phone number as WhatsApp writes it, for `allow_from`. */
export const PHONE_FORM = /^\d{6,15}$/;

/** Whether `id` is a BSUID or a parent BSUID (and so no phone number or group id, both digits). */
export const isBsuid = (id: string): boolean => BSUID_FORM.test(id) || PARENT_BSUID_FORM.test(id);

/**
 * The addressing fields of a send to `chatId`. A BSUID goes in `recipient`, not `to`: `to`
 * takes phone numbers and group ids only (Meta's send API; a BSUID in `to` is read as a phone
 * number, so the message is accepted and never arrives). `recipient_type` stays `individual`
 * for a person, whichever field names them.
 */
export function addressOf(chatId: string, chatType: 'dm' | 'group' | 'channel'): Record<string, string> {
  if (chatType !== 'dm') return { recipient_type: 'group', to: chatId };
  return isBsuid(chatId) ? { recipient_type: 'individual', recipient: chatId } : { recipient_type: 'individual', to: chatId };
}
