import { beforeEach, describe, expect, it } from 'vitest';
import { STOP_MARKER } from '../../src/stream/reply-stream.js';
import type { FakeLlm, RecordedRequest } from '../fakes/llm/server.js';
import type { FakeWhatsApp } from '../fakes/whatsapp/server.js';
import { say, withCountingFile } from '../helpers/approval.js';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChannelDaemon, withLlm } from '../helpers/fixtures.js';
import { failNextInboxAdd } from '../helpers/inbox-faults.js';
import { firstMcpConnected } from '../helpers/mcp.js';
import { echoAgent as echo, llmAgent, webchatChannel } from '../helpers/toml.js';
import { ChatClient } from '../helpers/webchat-client.js';
import { whatsappChannel, whatsappEnv, withWhatsApp } from '../helpers/whatsapp.js';

const USER = '4915112345678';
const GROUP = '120363025246125888';
const words = (n: number, p = 'w') => Array.from({ length: n }, (_, i) => `${p}${i}`).join(' ');

describe('WhatsApp channel against the fake Cloud API', () => {
  let wa: FakeWhatsApp;
  let d: TestDaemon | undefined;
  beforeEach(async () => {
    wa = await withWhatsApp();
  });

  const start = async (body: string, env: NodeJS.ProcessEnv = whatsappEnv(wa)) => {
    d = await withChannelDaemon(body, env);
    wa.webhookUrl = `${d.url}/webhooks/wa`;
    return d;
  };
  const received = async () => (await d!.daemon.metrics.received.get()).values.reduce((n, v) => n + v.value, 0);
  const idle = () => waitFor(() => d!.daemon.status().turns.in_flight === 0 && d!.daemon.status().turns.queued === 0, 15_000);

  it('the subscription check answers the challenge only with the right verify token', async () => {
    await start(echo(0) + whatsappChannel(wa));
    const check = (token: string, mode = 'subscribe') =>
      fetch(`${wa.webhookUrl}?hub.mode=${mode}&hub.verify_token=${encodeURIComponent(token)}&hub.challenge=1158201444`);
    const ok = await check(wa.verifyToken);
    expect(ok.status).toBe(200);
    expect(await ok.text()).toBe('1158201444');
    expect((await check('not-it')).status).toBe(403);
    expect((await check(wa.verifyToken, 'unsubscribe')).status).toBe(403);
  });

  it('a wrong or missing X-Hub-Signature-256 is 401 and nothing is stored; the signed one is answered once, in reply to it', async () => {
    await start(echo(0) + whatsappChannel(wa));
    const forged = wa.notification([wa.textMessage('forged')]);
    expect(await wa.post(forged, wa.sign(JSON.stringify(forged), 'the-wrong-secret'))).toBe(401);
    expect(await wa.post(forged, '')).toBe(401);
    expect(await wa.post(forged, 'sha256=zz')).toBe(401);
    expect(await received()).toBe(0);
    const real = wa.textMessage('the real one');
    expect(await wa.deliver(wa.notification([real], [{ wa_id: USER, name: 'Ada' }]))).toEqual([200]);
    await waitFor(() => wa.texts(USER)[0] === 'the real one', 10_000);
    expect(wa.sent).toHaveLength(1);
    expect(wa.sent[0]).toMatchObject({ recipientType: 'individual', type: 'text', contextId: real.id });
    expect(d!.logs.lines.filter((l) => l.includes('wrong or missing X-Hub-Signature-256'))).toHaveLength(3);
  });

  it('statuses are not messages; a redelivered webhook (same wamid) is answered once', async () => {
    await start(echo(0) + whatsappChannel(wa));
    expect(await wa.post(wa.statusNotification('wamid.OUT0', 'delivered'))).toBe(200);
    expect(await wa.post(wa.statusNotification('wamid.OUT0', 'read'))).toBe(200);
    const note = wa.notification([wa.textMessage('only once')]);
    expect(await wa.post(note)).toBe(200);
    expect(await wa.post(note)).toBe(200);
    await waitFor(() => wa.texts(USER)[0] === 'only once', 10_000);
    await idle();
    expect(wa.texts(USER)).toEqual(['only once']);
    expect(await received()).toBe(1);
    expect((await d!.daemon.metrics.duplicates.get()).values[0]!.value).toBe(1);
  });

  it('a webhook that cannot be stored is answered 503 and stored when Meta delivers it again', async () => {
    await start(echo(0) + whatsappChannel(wa));
    failNextInboxAdd(d!);
    expect(await wa.deliver(wa.notification([wa.textMessage('try again')]))).toEqual([503, 200]);
    await waitFor(() => wa.texts(USER)[0] === 'try again', 10_000);
    await idle();
    expect(wa.texts(USER)).toHaveLength(1);
  });

  it('in groups only a mention or a reply to the bot is answered, in the group', async () => {
    await start(echo(0) + whatsappChannel(wa));
    await wa.deliver(wa.notification([wa.textMessage('just chatting', { group: GROUP })]));
    await waitFor(() => d!.logs.entries().some((l) => l.msg === 'message received' && l.verdict === 'unaddressed'));
    await wa.deliver(wa.notification([wa.textMessage(`@${wa.number} hello bot`, { group: GROUP })]));
    await waitFor(() => wa.texts(GROUP)[0] === 'hello bot', 10_000);
    await wa.deliver(wa.notification([wa.textMessage('and you', { group: GROUP, contextId: wa.sent[0]!.id })]));
    await waitFor(() => wa.texts(GROUP)[1] === 'and you', 10_000);
    await idle();
    expect(wa.texts(GROUP)).toEqual(['hello bot', 'and you']);
    expect(wa.sent.every((m) => m.recipientType === 'group')).toBe(true);
  });

  it('a long Markdown answer is split at 4096 with WhatsApp formatting; typing shows meanwhile', async () => {
    const llm = await withLlm();
    const code = Array.from({ length: 120 }, (_, i) => `console.log("line ${i}");`).join('\n');
    const para = Array.from({ length: 60 }, (_, i) => `Point **${i}** is *quite* ~~wrong~~ right, see [docs](https://example.org/${i}).`).join('\n');
    const answer = `## Plan\n\n${para}\n\n\`\`\`js\n${code}\n\`\`\`\n\nThat is all.`;
    expect(answer.length).toBeGreaterThan(4096);
    llm.script({ kind: 'stream', chunks: answer.match(/[\s\S]{1,500}/g)!.map((content, i) => ({ content, delayMs: i === 0 ? 600 : 0 })) });
    await start(llmAgent(llm.url) + whatsappChannel(wa));
    const incoming = wa.textMessage('write it all');
    await wa.deliver(wa.notification([incoming]));
    await waitFor(() => wa.texts(USER).join('').includes('That is all.'), 15_000);
    const texts = wa.texts(USER);
    expect(texts.length).toBeGreaterThanOrEqual(2);
    for (const t of texts) {
      expect(t.length).toBeLessThanOrEqual(4096);
      expect(t.split('```').length % 2).toBe(1);
    }
    const all = texts.join('\n');
    expect(texts[0]).toMatch(/^\*Plan\*/);
    expect(all).toContain('Point *7* is _quite_ ~wrong~ right, see docs (https://example.org/7).');
    expect(all).not.toContain('**');
    expect(all).not.toContain('```js');
    for (let i = 0; i < 120; i++) expect(all).toContain(`console.log("line ${i}");`);
    expect(wa.sent.every((m) => m.contextId === incoming.id)).toBe(true);
    expect(wa.callsOf('typing')[0]!.body).toMatchObject({ status: 'read', message_id: incoming.id, typing_indicator: { type: 'text' } });
  });

  it('/stop mid-answer gives one message: what was written with the stop marker', async () => {
    await start(echo(150) + whatsappChannel(wa));
    await wa.deliver(wa.notification([wa.textMessage(words(60))]));
    await waitFor(() => d!.daemon.status().turns.in_flight === 1 && wa.callsOf('typing').length >= 1, 10_000);
    await wa.deliver(wa.notification([wa.textMessage('/stop')]));
    await waitFor(() => wa.texts(USER).some((t) => t.endsWith(STOP_MARKER)), 10_000);
    await idle();
    const answers = wa.texts(USER).filter((t) => t.startsWith('w0'));
    expect(answers).toHaveLength(1);
    expect(answers[0]).not.toContain('w59');
  });

  it('429 with Retry-After, a 5xx and a dropped connection on send: the answer lands once', async () => {
    await start(echo(0) + whatsappChannel(wa));
    wa.fail('messages', { status: 429, retryAfter: 1 });
    wa.fail('messages', { status: 503 });
    wa.fail('messages', { drop: true });
    await wa.deliver(wa.notification([wa.textMessage('through the storm')]));
    await waitFor(() => wa.texts(USER)[0] === 'through the storm', 20_000);
    await idle();
    expect(wa.texts(USER)).toEqual(['through the storm']);
    expect(wa.callsOf('messages')).toHaveLength(4);
    const [limited, next] = wa.callsOf('messages');
    expect(next!.at - limited!.at).toBeGreaterThanOrEqual(1000);
  });

  it('outside the 24-hour window (131047, at once or in a failed status) the answer is logged with that reason and not retried', async () => {
    await start(echo(0) + whatsappChannel(wa));
    wa.fail('messages', { status: 400, code: 131047, message: 'Re-engagement message' });
    await wa.deliver(wa.notification([wa.textMessage('too late')]));
    await waitFor(() => d!.logs.entries().some((l) => JSON.stringify(l).includes('CHANNEL_WINDOW_CLOSED')), 10_000);
    await idle();
    expect(wa.callsOf('messages')).toHaveLength(1);
    expect(wa.sent).toHaveLength(0);
    // The same refusal reported later, in a failed status of an accepted message: logged with its reason.
    expect(await wa.post(wa.statusNotification('wamid.OUT9', 'failed', { code: 131047, title: 'Re-engagement message' }))).toBe(200);
    const line = d!.logs.entries().find((l) => l.msg === 'WhatsApp could not deliver a message it had accepted');
    expect(line).toMatchObject({ code: 'CHANNEL_WINDOW_CLOSED', whatsappError: 131047, wamid: 'wamid.OUT9', reason: 'Re-engagement message (fake)' });
    expect(await received()).toBe(1);
  });

  it('an image: media id → URL → bytes fetched with the token; the model gets it', async () => {
    const llm = await withLlm();
    llm.script({ kind: 'stream', chunks: [{ content: 'A small picture.' }] });
    await start(`${llmAgent(llm.url, 'vision-1')}[models."vision-1"]\ninput = ["text", "image"]\n\n${whatsappChannel(wa)}`);
    const photo = Buffer.from('ffd8ffe000104a46494600010100000100010000', 'hex');
    wa.media.set('1234567890', { bytes: photo, mime: 'image/jpeg' });
    const m = { ...wa.textMessage(''), type: 'image', image: { id: '1234567890', mime_type: 'image/jpeg', caption: 'what is this?' } };
    delete (m as { text?: unknown }).text;
    await wa.deliver(wa.notification([m]));
    await waitFor(() => wa.texts(USER)[0] === 'A small picture.', 10_000);
    expect(wa.downloads).toEqual([{ id: '1234567890', authorization: `Bearer ${wa.token}` }]);
    const parts = userParts(llm.requests[0]!);
    expect(parts.some((p) => p.type === 'text' && p.text?.includes('what is this?'))).toBe(true);
    expect(parts).toContainEqual({ type: 'image_url', image_url: { url: `data:image/jpeg;base64,${photo.toString('base64')}` } });
  });

  it('approval: reply buttons on the question; a click on Approve runs the tool once', async () => {
    const llm: FakeLlm = await withLlm();
    const file = withCountingFile();
    await start(llmAgent(llm.url) + file.server() + whatsappChannel(wa));
    await firstMcpConnected(d!);
    llm.script(file.edit(), say('Edited on WhatsApp.'));
    await wa.deliver(wa.notification([wa.textMessage('edit the count')]));
    const q = await waitFor(() => wa.sent.find((m) => m.buttons), 20_000);
    expect(q.type).toBe('interactive');
    expect(q.text).toContain('fs__edit_file');
    expect(q.buttons!.map((b) => b.title)).toEqual(['Approve', 'Deny']);
    // Someone else's click in the same chat is refused.
    await wa.deliver(wa.notification([wa.buttonReply(q, 'Approve', '4917700000000')]));
    await waitFor(() => wa.texts('4917700000000').includes('Only the person who asked, or an approver, can decide this.'), 10_000);
    expect(file.runs).toBe(0);
    await wa.deliver(wa.notification([wa.buttonReply(q, 'Approve')]));
    await waitFor(() => wa.texts(USER).includes('Edited on WhatsApp.'), 20_000);
    expect(file.runs).toBe(1);
  });

  it('a refused access token parks the channel with CHANNEL_AUTH_FAILED while a web chat keeps answering', async () => {
    await start(`${echo(0)}${whatsappChannel(wa)}\n${webchatChannel()}`, whatsappEnv(wa, 'EAAGwrong'));
    expect(d!.daemon.status().channels.find((c) => c.id === 'wa')).toMatchObject({
      state: 'failed',
      next_retry_at: null,
      last_error: { code: 'CHANNEL_AUTH_FAILED', message: expect.stringContaining('access token was refused') },
    });
    // Parked: nothing takes webhooks for it.
    expect(await wa.post(wa.notification([wa.textMessage('anyone?')]))).toBe(404);
    const c = new ChatClient(d!.url, 'tab');
    await c.opened;
    c.send('web still works');
    expect((await c.finals())[0]!.text).toBe('web still works');
    c.close();
    expect(wa.callsOf('phone')).toHaveLength(0);
  });
});

/** The last user message of a request, as content parts. */
function userParts(req: RecordedRequest): Array<{ type: string; text?: string; image_url?: { url: string } }> {
  const last = [...req.body.messages].reverse().find((m) => m.role === 'user')!;
  return typeof last.content === 'string' ? [{ type: 'text', text: last.content }] : (last.content as never);
}
