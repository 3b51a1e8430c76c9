import { createHmac } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { builtinKinds } from '../../../channels/registry.js';
import { WhatsAppAdapter } from '../../../channels/whatsapp/adapter.js';
import { classifyWhatsAppError, GraphError } from '../../../channels/whatsapp/errors.js';
import { markdownToWhatsApp } from '../../../channels/whatsapp/format.js';
import { messagesOf, normalizeMessage, type WaWebhook } from '../../../channels/whatsapp/normalize.js';
import { notifyHandler, signatureValid } from '../../../channels/whatsapp/webhook.js';
import { ChannelKinds } from '../../../src/config/kinds.js';
import { parseConfig } from '../../../src/config/load.js';
import { ConfigError } from '../../../src/contracts/errors.js';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import { createLogger } from '../../../src/observe/logger.js';
import { HttpServer } from '../../../src/observe/http-server.js';
import { VERSION } from '../../../src/util/version.js';
import { LogSink } from '../../helpers/daemon.js';
import { trickled } from '../../helpers/raw-http.js';
import { scaled } from '../../helpers/timing.js';
import { withWhatsApp } from '../../helpers/whatsapp.js';
import { FakeWhatsApp } from '../../fakes/whatsapp/server.js';

const kinds = new ChannelKinds(builtinKinds);
const env = { WA_TOKEN: 't', WA_SECRET: 's', WA_VERIFY: 'v' };
const table = (extra: string) =>
  `[[channels]]\nid = "wa"\ntype = "whatsapp"\naccess_token_env = "WA_TOKEN"\napp_secret_env = "WA_SECRET"\nverify_token_env = "WA_VERIFY"\n${extra}`;

function problems(source: string, e: NodeJS.ProcessEnv = env): string[] {
  try {
    parseConfig(source, 'daemon.config.toml', kinds, e);
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
  return [];
}

describe('WhatsApp config', () => {
  it('parses with the pinned Graph API version by default', () => {
    const { config } = parseConfig(table('phone_number_id = "1065"\nallow_from = ["4915112345678"]\n'), 'daemon.config.toml', kinds, env);
    expect(config.channels[0]).toMatchObject({ type: 'whatsapp', phone_number_id: '1065', api_root: 'https://graph.facebook.com/v23.0' });
  });

  it('names the bad key with file:line:col: a phone number id that is not one, an allowlist entry with "+", missing secrets', () => {
    expect(problems(table('phone_number_id = "+1 555"\nallow_from = ["*"]\n'))).toEqual([
      expect.stringMatching(/^daemon\.config\.toml:7:19: channels\[0\]\.phone_number_id: write the numeric phone number id/),
    ]);
    expect(problems(table('phone_number_id = "1065"\nallow_from = ["*", "+49 151 12345678"]\n'))).toEqual([
      expect.stringMatching(/^daemon\.config\.toml:8:\d+: channels\[0\]\.allow_from\[1\]: write phone numbers as WhatsApp sends them/),
    ]);
    expect(problems('[[channels]]\nid = "wa"\ntype = "whatsapp"\nphone_number_id = "1"\nallow_from = ["*"]\n', {})).toEqual([
      'daemon.config.toml:1:1: channels[0]: channel "wa" needs access_token_env, or access_token_file, or access_token_credential',
      'daemon.config.toml:1:1: channels[0]: channel "wa" needs app_secret_env, or app_secret_file, or app_secret_credential',
      'daemon.config.toml:1:1: channels[0]: channel "wa" needs verify_token_env, or verify_token_file, or verify_token_credential',
    ]);
  });
});

describe('WhatsApp formatting', () => {
  it('turns Markdown into WhatsApp formatting and leaves code alone', () => {
    expect(markdownToWhatsApp('# Title\n**bold** and *it* and _it_ and ~~gone~~, [docs](https://x.org/a_b) and https://y.org')).toBe(
      '*Title*\n*bold* and _it_ and _it_ and ~gone~, docs (https://x.org/a_b) and https://y.org',
    );
    expect(markdownToWhatsApp('```ts\nconst a = **b**;\n```\nuse `**x**` here\n- item\n* item')).toBe(
      '```\nconst a = **b**;\n```\nuse `**x**` here\n- item\n* item',
    );
  });
});

describe('WhatsApp webhook signature', () => {
  const raw = Buffer.from('{"object":"whatsapp_business_account"}');
  const good = `sha256=${createHmac('sha256', 'secret').update(raw).digest('hex')}`;
  it('takes only the HMAC-SHA256 of the raw body with the app secret', () => {
    expect(signatureValid(raw, good, 'secret')).toBe(true);
    expect(signatureValid(raw, good, 'other')).toBe(false);
    expect(signatureValid(Buffer.from(`${raw} `), good, 'secret')).toBe(false);
    expect(signatureValid(raw, good.replace('sha256=', 'sha1='), 'secret')).toBe(false);
    expect(signatureValid(raw, 'sha256=', 'secret')).toBe(false);
    expect(signatureValid(raw, undefined, 'secret')).toBe(false);
    expect(signatureValid(raw, [good], 'secret')).toBe(false);
  });
});

describe('WhatsApp errors', () => {
  const graph = (status: number, code: number, retryAfterMs?: number) =>
    classifyWhatsAppError(new GraphError(status, { code, message: 'm' }, retryAfterMs), 'send');
  it('sorts Graph errors by code, then status', () => {
    expect(graph(400, 131047)).toMatchObject({ code: 'CHANNEL_WINDOW_CLOSED', retryable: false });
    expect(graph(401, 190)).toMatchObject({ code: 'CHANNEL_AUTH_FAILED', retryable: false });
    expect(graph(429, 130429, 3000)).toMatchObject({ code: 'CHANNEL_RATE_LIMITED', retryAfterMs: 3000 });
    expect(graph(400, 131056)).toMatchObject({ code: 'CHANNEL_RATE_LIMITED', retryAfterMs: 1000 });
    expect(graph(403, 10)).toMatchObject({ code: 'CHANNEL_FORBIDDEN' });
    expect(graph(503, 131000)).toMatchObject({ code: 'CHANNEL_UNAVAILABLE', retryable: true });
    expect(graph(400, 100)).toMatchObject({ code: 'CHANNEL_REQUEST_FAILED', retryable: false });
    expect(classifyWhatsAppError(new TypeError('fetch failed'))).toMatchObject({ code: 'CHANNEL_NETWORK', retryable: true });
  });
});

describe('WhatsApp notifications', () => {
  const me = { phoneNumberId: '1065', number: '15550100999' };
  const note = (value: unknown) => ({ object: 'whatsapp_business_account', entry: [{ id: 'W', changes: [{ field: 'messages', value }] }] }) as WaWebhook;
  it('reads messages of this number only; statuses, other numbers and junk are not messages', () => {
    const m = { from: '49151', id: 'wamid.1', timestamp: '1700000000', type: 'text', text: { body: 'hi' } };
    expect(messagesOf(note({ metadata: { phone_number_id: '1065' }, contacts: [{ wa_id: '49151', profile: { name: 'Ada' } }], messages: [m] }), me)).toEqual([
      { message: m, name: 'Ada' },
    ]);
    expect(messagesOf(note({ metadata: { phone_number_id: '9999' }, messages: [m] }), me)).toEqual([]);
    expect(messagesOf(note({ metadata: { phone_number_id: '1065' }, statuses: [{ id: 'wamid.2', status: 'read' }] }), me)).toEqual([]);
    expect(messagesOf(null as never, me)).toEqual([]);
    expect(messagesOf(note({ messages: [null, { id: 1 }] }), me)).toEqual([]);
  });

  it('a group message is addressed by a mention of the number, which is taken out of the text', () => {
    const base = { from: '49151', id: 'wamid.3', type: 'text', group_id: 'G1' };
    expect(normalizeMessage({ ...base, text: { body: 'chatting' } }, 'Ada', 'wa', me)).toMatchObject({ chat: { id: 'G1', type: 'group' }, addressed: false });
    expect(normalizeMessage({ ...base, text: { body: '@15550100999 hello' } }, 'Ada', 'wa', me)).toMatchObject({ text: 'hello', addressed: true });
    expect(normalizeMessage({ ...base, text: { body: 'yes' }, context: { from: '15550100999', id: 'wamid.OUT1' } }, 'Ada', 'wa', me)).toMatchObject({
      addressed: true,
      replyTo: 'wamid.OUT1',
    });
  });

  it('media become attachments with their caption as text; a reply button is its command', () => {
    const img = normalizeMessage(
      { from: '49151', id: 'wamid.4', type: 'image', image: { id: 'M1', mime_type: 'image/jpeg', caption: 'look' } },
      undefined,
      'wa',
      me,
    );
    expect(img).toMatchObject({ text: 'look', attachments: [{ id: 'M1', type: 'image', mime: 'image/jpeg' }], sender: { id: '49151', name: '49151' } });
    const doc = normalizeMessage(
      { from: '49151', id: 'wamid.5', type: 'document', document: { id: 'M2', filename: 'a.pdf', mime_type: 'application/pdf' } },
      undefined,
      'wa',
      me,
    );
    expect(doc?.attachments).toEqual([{ id: 'M2', type: 'document', name: 'a.pdf', mime: 'application/pdf' }]);
    const click = normalizeMessage(
      { from: '49151', id: 'wamid.6', type: 'interactive', interactive: { type: 'button_reply', button_reply: { id: '/approve 3fa9c1', title: 'Approve' } } },
      undefined,
      'wa',
      me,
    );
    expect(click).toMatchObject({ text: '/approve 3fa9c1', addressed: true });
    expect(normalizeMessage({ from: '49151', id: 'wamid.7', type: 'reaction' }, undefined, 'wa', me)).toBeUndefined();
  });
});

describe('WhatsApp webhook on a socket', () => {
  // The fake only builds and signs Meta's notifications here; it is not started.
  const wa = new FakeWhatsApp();
  let http: HttpServer;
  let port: number;
  let logs: LogSink;
  let delivered: ChannelMessage[];
  beforeEach(async () => {
    http = new HttpServer();
    ({ port } = await http.listen('127.0.0.1', 0));
    wa.webhookUrl = `http://127.0.0.1:${port}/webhooks/wa`;
    logs = new LogSink();
    delivered = [];
    const handler = notifyHandler({
      channelId: 'wa',
      appSecret: wa.appSecret,
      verifyToken: wa.verifyToken,
      me: () => ({ phoneNumberId: wa.phoneNumberId, number: wa.number }),
      deliver: async (m) => {
        delivered.push(m);
        return true;
      },
      log: createLogger({ level: 'warn', destination: logs }),
    });
    http.route('POST', '/webhooks/wa', handler, { scheme: 'hmac-sha256', describe: 'X-Hub-Signature-256' });
  });
  afterEach(() => http.close());

  it('a declared body over 1 MiB is 413 and the connection is closed, though the client keeps sending', async () => {
    const head = { 'content-type': 'application/json', 'content-length': String(64 * 1024 * 1024), 'x-hub-signature-256': `sha256=${'a'.repeat(64)}` };
    expect(await trickled(port, '/webhooks/wa', head, scaled(3_000))).toEqual({ status: 413, closed: true });
  });

  it("another phone number's notification is 200 and dropped, with a warning naming it once per interval", async () => {
    const other = (id: string, text: string) => wa.notification([wa.textMessage(text)], [], id);
    const warnings = (id: string) => logs.entries().filter((l) => l.phoneNumberId === id);
    expect(await wa.post(other('2077', 'for the other number'))).toBe(200);
    expect(await wa.post(other('2077', 'again for it'))).toBe(200);
    expect(await wa.post(wa.notification([wa.textMessage('mine')]))).toBe(200);
    expect(delivered.map((m) => m.text)).toEqual(['mine']);
    expect(warnings('2077')).toHaveLength(1);
    expect(warnings('2077')[0]).toMatchObject({ level: 40, channel: 'wa', messages: 1 });
    expect(String(warnings('2077')[0]!.msg)).toMatch(/phone_number_id 2077.*phone_number_id = "2077".*webhook override/);
    // Another number is warned about on its own.
    expect(await wa.post(other('3088', 'third'))).toBe(200);
    expect(warnings('3088')).toHaveLength(1);
  });
});

describe('WhatsApp media download', () => {
  const adapterOn = (apiRoot: string, token: string) =>
    new WhatsAppAdapter({
      id: 'wa',
      phoneNumberId: '106540352242922',
      apiRoot,
      accessToken: token,
      appSecret: 's',
      verifyToken: 'v',
      http: new HttpServer(),
      log: createLogger({ level: 'silent' }),
    });
  const photo = { id: 'M1', type: 'image', mime: 'image/jpeg' };
  const limits = () => ({ maxBytes: 1024 * 1024, signal: AbortSignal.timeout(scaled(5_000)) });

  it('fetches the file with the token and a User-Agent naming channeld and its version', async () => {
    const wa = await withWhatsApp();
    wa.media.set('M1', { bytes: Buffer.from('ffd8ffe0', 'hex'), mime: 'image/jpeg' });
    const bytes = await adapterOn(wa.apiRoot, wa.token).download(photo, limits());
    expect(bytes.toString('hex')).toBe('ffd8ffe0');
    expect(wa.callsOf('download').map((c) => c.userAgent)).toEqual([`channeld/${VERSION}`]);
    expect(wa.downloads).toEqual([{ id: 'M1', authorization: `Bearer ${wa.token}` }]);
  });

  it('an HTML page for the file is ATTACHMENT_UNAVAILABLE, not the image; an HTML document is the file', async () => {
    const wa = await withWhatsApp();
    wa.media.set('M1', { bytes: Buffer.from('ffd8ffe0', 'hex'), mime: 'image/jpeg' });
    wa.fail('download', { html: true });
    await expect(adapterOn(wa.apiRoot, wa.token).download(photo, limits())).rejects.toMatchObject({
      code: 'ATTACHMENT_UNAVAILABLE',
      message: expect.stringContaining('web page'),
    });
    wa.media.set('M2', { bytes: Buffer.from('<html>notes</html>'), mime: 'text/html' });
    const page = await adapterOn(wa.apiRoot, wa.token).download({ id: 'M2', type: 'document', name: 'notes.html', mime: 'text/html' }, limits());
    expect(page.toString()).toBe('<html>notes</html>');
  });
});
