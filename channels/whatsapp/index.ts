import { defineChannel } from '../../src/contracts/channel.js';
import { whatsappConfig } from './config.js';
import { BSUID_FORM, PARENT_BSUID_FORM, PHONE_FORM } from './ids.js';

/** Why an `allow_from` entry can never match a sender, or undefined when it can. */
function allowFromProblem(entry: string): string | undefined {
  if (entry === '*' || PHONE_FORM.test(entry) || BSUID_FORM.test(entry)) return undefined;
  // Senders are named by their own BSUID; the parent one (linked portfolios) never is.
  if (PARENT_BSUID_FORM.test(entry)) return `"${entry}" is a parent business-scoped user id; write the user's own one (e.g. "US.13491208655302741918")`;
  return `write phone numbers as WhatsApp sends them: digits with the country code, no "+" or spaces (e.g. "4915112345678"), business-scoped user ids as WhatsApp sends them (e.g. "US.13491208655302741918"), or "*"`;
}

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
  // A sender is named by the phone number WhatsApp sends (digits with the country code, no
  // "+") or, when it withholds it, by the business-scoped user id: an allowlist entry in any
  // other form would never match anyone.
  problems: (c) =>
    ((c as { allow_from?: string[] }).allow_from ?? []).flatMap((entry, i) => {
      const message = allowFromProblem(entry);
      return message ? [{ path: ['allow_from', i], message }] : [];
    }),
  load: async () => (await import('./factory.js')).createChannel,
});
