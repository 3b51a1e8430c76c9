import { defineChannel } from '../../src/contracts/channel.js';
import { whatsappConfig } from './config.js';

/** WhatsApp Business (Cloud API): a webhook in, Graph API calls out. */
export const whatsapp = defineChannel({
  kind: 'whatsapp',
  summary: 'a WhatsApp Business number, over the Cloud API webhook',
  config: whatsappConfig,
  secrets: {
    names: ['access_token', 'app_secret', 'verify_token'],
    needs: () => ({ required: ['access_token', 'app_secret', 'verify_token'], optional: [] }),
  },
  // Meta posts each webhook to whichever instance the balancer picks: every instance takes them.
  exclusiveListener: () => false,
  // WhatsApp sends ids as digits with the country code and no "+": an allowlist in any other
  // form would never match anyone.
  problems: (c) =>
    ((c as { allow_from?: string[] }).allow_from ?? []).flatMap((entry, i) =>
      entry === '*' || /^\d{6,15}$/.test(entry)
        ? []
        : [
            {
              path: ['allow_from', i],
              message: `write phone numbers as WhatsApp sends them: digits with the country code, no "+" or spaces (e.g. "4915112345678"), or "*"`,
            },
          ],
    ),
  load: async () => (await import('./factory.js')).createChannel,
});
