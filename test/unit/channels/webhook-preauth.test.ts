import { createHmac } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DeferredAckHttpReceiver } from '../../../channels/slack/receiver.js';
import { webhookHandler } from '../../../channels/telegram/webhook.js';
import { notifyHandler } from '../../../channels/whatsapp/webhook.js';
import { createLogger } from '../../../src/observe/logger.js';
import { HttpServer } from '../../../src/observe/http-server.js';
import { signSlack } from '../../fakes/slack/server.js';
import { rawHttp, trickled } from '../../helpers/raw-http.js';
import { scaled } from '../../helpers/timing.js';

// Slack HTTP mode and WhatsApp webhooks on a real socket: headers that cannot authenticate
// are refused before the body is read, and a body trickled past the deadline is 408.

// The body deadline, short here: the handlers read it from http-helpers.
vi.mock('../../../src/util/http-helpers.js', async (original) => ({ ...(await original<object>()), BODY_TIMEOUT_MS: 150 }));

const log = createLogger({ level: 'silent' });
const MIB = 1024 * 1024;

/** POSTs `headers` (and `body`, if any) on a raw socket, never the rest of a declared body. */
function raw(port: number, path: string, headers: Record<string, string>, body = ''): Promise<{ status: number; text: string }> {
  const head = Object.entries({ host: `127.0.0.1:${port}`, ...headers })
    .map(([k, v]) => `${k}: ${v}`)
    .join('\r\n');
  return rawHttp(port, `POST ${path} HTTP/1.1\r\n${head}\r\n\r\n${body}`);
}

let http: HttpServer;
let port: number;
beforeEach(async () => {
  http = new HttpServer();
  ({ port } = await http.listen('127.0.0.1', 0));
});
afterEach(() => http.close());

describe('Slack HTTP mode, before the body', () => {
  const secret = 'slack-signing-secret';
  beforeEach(async () => {
    await new DeferredAckHttpReceiver({ path: '/webhooks/slack', signingSecret: secret, http, log }).start();
  });
  const now = () => Math.floor(Date.now() / 1000);
  const head = (h: Record<string, string>) => ({ 'content-type': 'application/json', 'content-length': String(MIB), ...h });
  const sig = `v0=${'a'.repeat(64)}`;

  it('refuses a missing or malformed signature, or a timestamp outside 5 minutes, with 401 before any of the MiB arrives', async () => {
    for (const h of [
      {},
      { 'x-slack-request-timestamp': String(now()) },
      { 'x-slack-signature': sig },
      { 'x-slack-signature': 'v0=abc', 'x-slack-request-timestamp': String(now()) },
      { 'x-slack-signature': `v1=${'a'.repeat(64)}`, 'x-slack-request-timestamp': String(now()) },
      { 'x-slack-signature': sig, 'x-slack-request-timestamp': String(now() - 400) },
      { 'x-slack-signature': sig, 'x-slack-request-timestamp': String(now() + 400) },
      { 'x-slack-signature': sig, 'x-slack-request-timestamp': 'soon' },
    ] as Array<Record<string, string>>)
      expect(await raw(port, '/webhooks/slack', head(h))).toEqual({ status: 401, text: expect.stringContaining('invalid signature or stale timestamp') });
  });

  it('still checks the HMAC over the body, answers a signed one, and cuts a trickled body with 408', async () => {
    const body = JSON.stringify({ type: 'url_verification', challenge: 'c-1' });
    const signed = signSlack(body, secret);
    const length = { 'content-length': String(Buffer.byteLength(body)) };
    expect(await raw(port, '/webhooks/slack', { ...signed, ...length, connection: 'close' }, body)).toMatchObject({
      status: 200,
      text: expect.stringContaining('{"challenge":"c-1"}'),
    });
    // Well-formed, fresh, wrong: read, then refused.
    expect(await raw(port, '/webhooks/slack', { ...signed, ...length, 'x-slack-signature': sig }, body)).toMatchObject({ status: 401 });
    expect(await raw(port, '/webhooks/slack', head(signed), body)).toMatchObject({ status: 408 });
  });

  it('a declared body over 1 MiB is 413 and the connection is closed, though the client keeps sending', async () => {
    const h = head({ 'x-slack-signature': sig, 'x-slack-request-timestamp': String(now()), 'content-length': String(64 * MIB) });
    expect(await trickled(port, '/webhooks/slack', h, scaled(3_000))).toEqual({ status: 413, closed: true });
  });
});

describe('WhatsApp webhook, before the body', () => {
  const secret = 'wa-app-secret';
  const delivered: unknown[] = [];
  beforeEach(() => {
    delivered.length = 0;
    const handler = notifyHandler({
      channelId: 'wa',
      appSecret: secret,
      verifyToken: 'v',
      me: () => ({ phoneNumberId: '1065', number: '15550100999' }),
      deliver: async (m) => {
        delivered.push(m);
        return true;
      },
      log,
    });
    http.route('POST', '/webhooks/wa', handler, { scheme: 'hmac-sha256', describe: 'X-Hub-Signature-256' });
  });
  const head = (h: Record<string, string>) => ({ 'content-type': 'application/json', 'content-length': String(MIB), ...h });

  it('refuses a missing or malformed X-Hub-Signature-256 with 401 before any of the MiB arrives', async () => {
    for (const h of [
      {},
      { 'x-hub-signature-256': 'sha256=' },
      { 'x-hub-signature-256': `sha1=${'a'.repeat(40)}` },
      { 'x-hub-signature-256': `sha256=${'z'.repeat(64)}` },
      { 'x-hub-signature-256': `sha256=${'a'.repeat(63)}` },
    ] as Array<Record<string, string>>)
      expect(await raw(port, '/webhooks/wa', head(h))).toEqual({ status: 401, text: expect.stringContaining('invalid signature') });
  });

  it('still checks the HMAC over the body, stores a signed one, and cuts a trickled body with 408 storing nothing', async () => {
    const body = JSON.stringify({
      object: 'whatsapp_business_account',
      entry: [
        {
          id: 'W',
          changes: [
            {
              field: 'messages',
              value: {
                metadata: { phone_number_id: '1065' },
                contacts: [{ wa_id: '49151', profile: { name: 'Ada' } }],
                messages: [{ from: '49151', id: 'wamid.1', timestamp: '1700000000', type: 'text', text: { body: 'hi' } }],
              },
            },
          ],
        },
      ],
    });
    const good = { 'x-hub-signature-256': `sha256=${createHmac('sha256', secret).update(body).digest('hex')}` };
    const length = { 'content-length': String(Buffer.byteLength(body)) };
    expect(await raw(port, '/webhooks/wa', { ...good, ...length, connection: 'close' }, body)).toMatchObject({ status: 200 });
    expect(delivered).toHaveLength(1);
    expect(await raw(port, '/webhooks/wa', { ...length, 'x-hub-signature-256': `sha256=${'a'.repeat(64)}` }, body)).toMatchObject({
      status: 401,
    });
    // All of the notification but one byte, then nothing.
    expect(await raw(port, '/webhooks/wa', { ...good, 'content-length': String(Buffer.byteLength(body) + 1) }, body)).toMatchObject({ status: 408 });
    expect(delivered).toHaveLength(1);
  });
});

describe('Telegram webhook, the body deadline', () => {
  it('a body trickled past the deadline after a right secret is 408, nothing delivered; refusals close the connection', async () => {
    const delivered: unknown[] = [];
    const handler = webhookHandler({
      channelId: 'tg',
      secret: 'tg-secret',
      bot: () => ({ id: 1, username: 'bot' }),
      deliver: async (m) => {
        delivered.push(m);
        return true;
      },
      log,
    });
    http.route('POST', '/webhooks/tg', handler, { scheme: 'secret-token', describe: 'X-Telegram-Bot-Api-Secret-Token' });
    const head = { 'content-type': 'application/json', 'content-length': '100', 'x-telegram-bot-api-secret-token': 'tg-secret' };
    expect(await raw(port, '/webhooks/tg', head, '{"update_id":')).toMatchObject({ status: 408 });
    expect(delivered).toEqual([]);
    // A wrong secret (401) and a declared body over 1 MiB (413) close the connection, though the client keeps sending.
    const huge = { ...head, 'content-length': String(64 * MIB) };
    expect(await trickled(port, '/webhooks/tg', { ...huge, 'x-telegram-bot-api-secret-token': 'wrong' }, scaled(3_000))).toEqual({ status: 401, closed: true });
    expect(await trickled(port, '/webhooks/tg', huge, scaled(3_000))).toEqual({ status: 413, closed: true });
  });
});
