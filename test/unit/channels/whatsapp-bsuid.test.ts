import { describe, expect, it } from 'vitest';
import { builtinKinds } from '../../../channels/registry.js';
import { WhatsAppAdapter } from '../../../channels/whatsapp/adapter.js';
import { contactsText, locationText } from '../../../channels/whatsapp/content.js';
import { normalizeMessage } from '../../../channels/whatsapp/normalize.js';
import { ChannelKinds } from '../../../src/config/kinds.js';
import { parseConfig } from '../../../src/config/load.js';
import { ConfigError } from '../../../src/contracts/errors.js';
import { createLogger } from '../../../src/observe/logger.js';
import { HttpServer } from '../../../src/observe/http-server.js';
import type { FakeWhatsApp } from '../../fakes/whatsapp/server.js';
import { type TestDaemon, waitFor } from '../../helpers/daemon.js';
import { withChannelDaemon } from '../../helpers/fixtures.js';
import { scaled } from '../../helpers/timing.js';
import { echoAgent } from '../../helpers/toml.js';
import { whatsappChannel, whatsappEnv, withWhatsApp } from '../../helpers/whatsapp.js';

const PHONE = '4915112345678';
/** Users known only by their business-scoped user id: WhatsApp withholds their numbers. */
const ADA = 'US.13491208655302741918';
const BOB = 'DE.88210934477120983311';

/** The daemon with channel "wa" on the fake (`allowFrom` as its allow_from), its webhook set on the fake. */
async function start(wa: FakeWhatsApp, allowFrom = '["*"]'): Promise<TestDaemon> {
  const d = await withChannelDaemon(echoAgent(0) + whatsappChannel(wa).replace('allow_from = ["*"]', `allow_from = ${allowFrom}`), whatsappEnv(wa));
  wa.webhookUrl = `${d.url}/webhooks/wa`;
  return d;
}

const received = async (d: TestDaemon) => (await d.daemon.metrics.received.get()).values.reduce((n, v) => n + v.value, 0);
const logged = (d: TestDaemon, msg: RegExp) => d.logs.entries().filter((l) => msg.test(String(l.msg)));

describe('a WhatsApp user known only by a business-scoped user id', () => {
  it('is answered to that id, addressed by `recipient`, in reply to their message', async () => {
    const wa = await withWhatsApp();
    const d = await start(wa);
    const hello = wa.textMessage('hello from a username', { from: null, userId: ADA });
    expect(await wa.post(wa.notification([hello], [{ user_id: ADA, name: 'Ada', username: 'ada.l' }]))).toBe(200);
    await waitFor(() => wa.texts(ADA)[0] === 'hello from a username', 10_000);
    expect(wa.sent[0]).toMatchObject({ via: 'recipient', recipientType: 'individual', contextId: hello.id });
    expect(wa.callsOf('messages')[0]!.body).not.toHaveProperty('to');
    expect(wa.lost).toEqual([]);
    expect(logged(d, /^message received$/).map((l) => l.scope)).toEqual([`wa:${ADA}`]);
  });

  it('named only by the one contact of its notification is still theirs', async () => {
    const wa = await withWhatsApp();
    await start(wa);
    expect(await wa.post(wa.notification([wa.textMessage('no from_user_id', { from: null })], [{ user_id: ADA, name: 'Ada' }]))).toBe(200);
    await waitFor(() => wa.texts(ADA)[0] === 'no from_user_id', 10_000);
  });

  it('with a phone number too keeps the conversation of that number, answered by `to`', async () => {
    const wa = await withWhatsApp();
    const d = await start(wa);
    await wa.deliver(wa.notification([wa.textMessage('before BSUIDs')], [{ wa_id: PHONE, name: 'Ada' }]));
    await waitFor(() => wa.texts(PHONE).length === 1, 10_000);
    await wa.deliver(wa.notification([wa.textMessage('with both', { userId: ADA })], [{ wa_id: PHONE, user_id: ADA, name: 'Ada' }]));
    await waitFor(() => wa.texts(PHONE).length === 2, 10_000);
    expect(wa.texts(PHONE)).toEqual(['before BSUIDs', 'with both']);
    expect(wa.sent.map((m) => m.via)).toEqual(['to', 'to']);
    expect(wa.texts(ADA)).toEqual([]);
    expect(logged(d, /^message received$/).map((l) => l.scope)).toEqual([`wa:${PHONE}`, `wa:${PHONE}`]);
    const both = normalizeMessage({ from: PHONE, from_user_id: ADA, id: 'wamid.1', type: 'text', text: { body: 'x' } }, 'Ada', 'wa', {
      phoneNumberId: wa.phoneNumberId,
      number: wa.number,
    });
    expect(both).toMatchObject({ chat: { id: PHONE, type: 'dm' }, sender: { id: PHONE, name: 'Ada' } });
  });

  it('listed in allow_from by that id is admitted; another id and a phone number are told they are not allowed', async () => {
    const wa = await withWhatsApp();
    await start(wa, `["${ADA}"]`);
    await wa.deliver(wa.notification([wa.textMessage('let me in', { from: null, userId: ADA })]));
    await waitFor(() => wa.texts(ADA)[0] === 'let me in', 10_000);
    await wa.deliver(wa.notification([wa.textMessage('me too', { from: null, userId: BOB })]));
    await waitFor(() => wa.texts(BOB).length === 1, 10_000);
    expect(wa.texts(BOB)[0]).toContain(`not allowed to talk to this bot. Your id is ${BOB}`);
    await wa.deliver(wa.notification([wa.textMessage('and me')]));
    await waitFor(() => wa.texts(PHONE).length === 1, 10_000);
    expect(wa.texts(PHONE)[0]).toContain(`Your id is ${PHONE}`);
    expect(wa.texts(ADA)).toEqual(['let me in']);
  });

  it('a send WhatsApp refuses for a BSUID (131062) fails readably, not retried', async () => {
    const wa = await withWhatsApp();
    const adapter = new WhatsAppAdapter({
      id: 'wa',
      phoneNumberId: wa.phoneNumberId,
      apiRoot: wa.apiRoot,
      accessToken: wa.token,
      appSecret: wa.appSecret,
      verifyToken: wa.verifyToken,
      http: new HttpServer(),
      log: createLogger({ level: 'silent' }),
    });
    wa.fail('messages', { status: 400, code: 131062, message: 'Business-scoped User ID recipients are not supported for this message.' });
    const target = { channelId: 'wa', chatId: ADA, chatType: 'dm' as const };
    await expect(adapter.send(target, 'hi', { signal: AbortSignal.timeout(scaled(5_000)) })).rejects.toMatchObject({
      code: 'CHANNEL_REQUEST_FAILED',
      retryable: false,
      message: expect.stringMatching(/131062.*does not deliver this kind of message to a business-scoped user id/),
    });
    expect(wa.callsOf('messages')).toHaveLength(1);
    // The same send, unrefused, goes to the BSUID by `recipient`.
    expect(await adapter.send(target, 'hi', { signal: AbortSignal.timeout(scaled(5_000)) })).toMatchObject({ chatId: ADA });
    expect(wa.sent).toMatchObject([{ to: ADA, via: 'recipient', text: 'hi' }]);
  });
});

describe('WhatsApp messages without text', () => {
  it('a location reaches the agent as text, and so do shared contacts', async () => {
    const wa = await withWhatsApp();
    await start(wa);
    const place = { latitude: 37.44216, longitude: -122.16153, name: 'Philz Coffee', address: '101 Forest Ave, Palo Alto' };
    await wa.deliver(wa.notification([wa.locationMessage(place)]));
    await waitFor(() => wa.texts(PHONE).length === 1, 10_000);
    expect(wa.texts(PHONE)[0]).toBe('📍 Location: Philz Coffee, 101 Forest Ave, Palo Alto (37.44216, -122.16153)');
    await wa.deliver(wa.notification([wa.contactsMessage([{ name: 'Barbara Johnson', phones: ['+1 940 555 1234', '+1 650 555 1234'] }])]));
    await waitFor(() => wa.texts(PHONE).length === 2, 10_000);
    expect(wa.texts(PHONE)[1]).toBe('📇 Contact: Barbara Johnson (+1 940 555 1234, +1 650 555 1234)');
  });

  it('location and contacts text: only the parts sent, cards and fields bounded', () => {
    expect(locationText({ latitude: 52.52, longitude: 13.405 })).toBe('📍 Location: (52.52, 13.405)');
    expect(locationText({ name: 'Home' })).toBe('📍 Location: Home');
    expect(locationText({})).toBeUndefined();
    const cards = Array.from({ length: 12 }, (_, i) => ({ name: { formatted_name: `P${i}` }, phones: [1, 2, 3, 4].map((n) => ({ phone: `+${n}` })) }));
    const lines = contactsText(cards)!.split('\n');
    expect(lines).toHaveLength(11);
    expect(lines[0]).toBe('📇 Contact: P0 (+1, +2, +3, …)');
    expect(lines[10]).toBe('… and 2 more contacts');
    const long = contactsText([{ name: { formatted_name: 'x'.repeat(500) } }])!;
    expect(long.length).toBeLessThan(230);
    expect(contactsText([])).toBeUndefined();
  });

  it('a message naming no sender is acknowledged and warned about; nothing is stored', async () => {
    const wa = await withWhatsApp();
    const d = await start(wa);
    const orphan = wa.textMessage('who am I?', { from: null });
    expect(await wa.post(wa.notification([orphan]))).toBe(200);
    const warning = await waitFor(() => logged(d, /names no sender/)[0]);
    expect(warning).toMatchObject({ level: 40, channel: 'wa', wamid: orphan.id, type: 'text' });
    expect(await received(d)).toBe(0);
  });

  it('an unsupported type is warned about with its type and errors; a BSUID change and notification errors are logged', async () => {
    const wa = await withWhatsApp();
    const d = await start(wa);
    expect(await wa.post(wa.notification([wa.unsupportedMessage('poll_creation')]))).toBe(200);
    const unsupported = await waitFor(() => logged(d, /type "unsupported" has nothing channeld can read/)[0]);
    expect(unsupported).toMatchObject({ level: 40, unsupportedType: 'poll_creation', whatsappErrors: [{ code: 131051 }] });
    expect(await wa.post(wa.notification([wa.userIdChangedMessage(ADA, BOB)]))).toBe(200);
    const changed = await waitFor(() => logged(d, /changed their number or business-scoped user id/)[0]);
    expect(changed).toMatchObject({ level: 30, systemType: 'user_changed_user_id', previousUserId: ADA, userId: BOB });
    expect(await wa.post(wa.errorsNotification([{ code: 131000, title: 'Something went wrong' }]))).toBe(200);
    const errors = await waitFor(() => logged(d, /reported errors in a webhook notification/)[0]);
    expect(errors).toMatchObject({ level: 40, whatsappErrors: [{ code: 131000, title: 'Something went wrong' }] });
    expect(await received(d)).toBe(0);
    expect(wa.sent).toEqual([]);
  });
});

describe('WhatsApp allow_from and the fake send API', () => {
  const kinds = new ChannelKinds(builtinKinds);
  const env = { WA_TOKEN: 't', WA_SECRET: 's', WA_VERIFY: 'v' };
  const problems = (allowFrom: string): string[] => {
    const source = `[[channels]]\nid = "wa"\ntype = "whatsapp"\naccess_token_env = "WA_TOKEN"\napp_secret_env = "WA_SECRET"\nverify_token_env = "WA_VERIFY"\nphone_number_id = "1065"\nallow_from = ${allowFrom}\n`;
    try {
      parseConfig(source, 'daemon.config.toml', kinds, env);
    } catch (err) {
      if (err instanceof ConfigError) return [...err.problems];
      throw err;
    }
    return [];
  };

  it('takes business-scoped user ids as WhatsApp writes them, and names the key of any other form', () => {
    expect(problems(`["${ADA}", "${PHONE}"]`)).toEqual([]);
    expect(problems(`["${ADA}", "us.1349", "US.ENT.11815799212886844830"]`)).toEqual([
      expect.stringMatching(/channels\[0\]\.allow_from\[1\]: write phone numbers as WhatsApp sends them.*business-scoped user ids.*US\.13491208655302741918/),
      expect.stringMatching(/channels\[0\]\.allow_from\[2\]: "US\.ENT\.11815799212886844830" is a parent business-scoped user id/),
    ]);
  });

  it('the fake refuses a send naming no one, a bad recipient or recipient_type; a BSUID in `to` is lost', async () => {
    const wa = await withWhatsApp();
    const send = async (addressing: Record<string, unknown>) => {
      const res = await fetch(`${wa.apiRoot}/${wa.phoneNumberId}/messages`, {
        method: 'POST',
        headers: { authorization: `Bearer ${wa.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ messaging_product: 'whatsapp', type: 'text', text: { body: 'x' }, ...addressing }),
      });
      return { status: res.status, code: ((await res.json()) as { error?: { code?: number } }).error?.code };
    };
    expect(await send({ recipient_type: 'individual' })).toEqual({ status: 400, code: 100 });
    expect(await send({ recipient: PHONE })).toEqual({ status: 400, code: 100 });
    expect(await send({ recipient_type: 'business_scoped_user_id', recipient: ADA })).toEqual({ status: 400, code: 100 });
    expect(await send({ recipient_type: 'group', recipient: ADA })).toEqual({ status: 400, code: 100 });
    expect(await send({ recipient_type: 'individual', to: ADA })).toEqual({ status: 200, code: undefined });
    expect(wa.sent).toEqual([]);
    expect(wa.lost).toMatchObject([{ to: ADA, via: 'to' }]);
    expect(await send({ to: PHONE, recipient: ADA })).toEqual({ status: 200, code: undefined });
    expect(wa.sent).toMatchObject([{ to: PHONE, via: 'to' }]);
  });
});
