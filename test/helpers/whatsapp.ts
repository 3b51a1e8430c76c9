import { FakeWhatsApp } from '../fakes/whatsapp/server.js';
import { withStarted } from './fixtures.js';

/** The fake WhatsApp Cloud API (and Meta's webhook sender), listening; closed when the test finishes. */
export const withWhatsApp = (): Promise<FakeWhatsApp> => withStarted(new FakeWhatsApp());

/** Channel "wa" on the fake; secrets WA_TOKEN, WA_SECRET and WA_VERIFY; webhook /webhooks/wa. */
export const whatsappChannel = (wa: FakeWhatsApp, extra = ''): string =>
  `[[channels]]\nid = "wa"\ntype = "whatsapp"\nphone_number_id = "${wa.phoneNumberId}"\naccess_token_env = "WA_TOKEN"\napp_secret_env = "WA_SECRET"\nverify_token_env = "WA_VERIFY"\napi_root = "${wa.apiRoot}"\nallow_from = ["*"]\n${extra}`;

/** The environment `whatsappChannel` reads its secrets from (`token` to present another one). */
export const whatsappEnv = (wa: FakeWhatsApp, token = wa.token): NodeJS.ProcessEnv => ({
  WA_TOKEN: token,
  WA_SECRET: wa.appSecret,
  WA_VERIFY: wa.verifyToken,
});
