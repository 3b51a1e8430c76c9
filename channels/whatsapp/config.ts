import { z } from 'zod';
import type { ChannelConfigOf } from '../../src/contracts/channel.js';
import { secretRef } from '../../src/contracts/secret-ref.js';

/**
 * The Graph API version channeld was written against. Meta keeps each version for about two
 * years; a newer one is a deliberate change (its webhook and send shapes are re-checked).
 */
export const GRAPH_API_ROOT = 'https://graph.facebook.com/v23.0';

/** `[[channels]] type = "whatsapp"` (WhatsApp Cloud API): its own keys, besides the ones every channel has. */
export const whatsappConfig = z.strictObject({
  /** The business phone number's id (WhatsApp Manager → API setup), not the number itself. */
  phone_number_id: z.string().regex(/^\d+$/, 'write the numeric phone number id from the app\'s API setup page, e.g. "106540352242922"'),
  /** A system user's access token with whatsapp_business_messaging. */
  ...secretRef('access_token'),
  /** The app secret: every webhook POST is checked against its X-Hub-Signature-256. */
  ...secretRef('app_secret'),
  /** The verify token typed into the app's webhook settings; only it answers the subscription check. */
  ...secretRef('verify_token'),
  /** The Graph API with its version; change it for a proxy or a newer pinned version. */
  api_root: z.url().default(GRAPH_API_ROOT),
});

export type WhatsAppConfig = ChannelConfigOf<typeof whatsappConfig>;
