import { beforeEach, describe, expect, it } from 'vitest';
import { STOP_MARKER } from '../../src/stream/reply-stream.js';
import { type FakeTeams, TENANT } from '../fakes/teams/server.js';
import { say, withCountingFile } from '../helpers/approval.js';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChannelDaemon, withLlm } from '../helpers/fixtures.js';
import { firstMcpConnected } from '../helpers/mcp.js';
import { teamsChannel, teamsEnv, withTeams } from '../helpers/teams.js';
import { echoAgent as echo, llmAgent } from '../helpers/toml.js';

const words = (n: number) => Array.from({ length: n }, (_, i) => `word${i}`).join(' ');
const DM = 'a:1personal-ada';
const GROUP = '19:group@thread.v2';
const CHANNEL = '19:channel@thread.tacv2;messageid=1700000000000';

describe('Teams channel against the fake Bot Framework', () => {
  let ms: FakeTeams;
  let d: TestDaemon | undefined;
  beforeEach(async () => {
    ms = await withTeams();
  });

  const start = async (body: string, env: NodeJS.ProcessEnv = teamsEnv(ms)) => {
    d = await withChannelDaemon(body, env);
    ms.webhook = `${d.url}/webhooks/ms`;
    return d;
  };
  const received = () =>
    (d!.daemon.metrics.received.get() as Promise<{ values: Array<{ value: number }> }>).then((m) => m.values.reduce((a, v) => a + v.value, 0));
  const idle = () => waitFor(() => d!.daemon.status().turns.in_flight === 0, 10_000);

  it("a 1:1 message streams with Teams' streaming protocol and ends in one final message; the token is fetched once", async () => {
    await start(echo(100) + teamsChannel(ms));
    const text = words(20);
    expect(await ms.post(ms.activity(text))).toBe(200);
    await waitFor(() => ms.texts(DM)[0] === text, 15_000);
    await idle();
    expect(ms.activities).toHaveLength(1);
    expect(ms.activities[0]!.streamed).toBe(true);
    expect(ms.streamUpdates.length).toBeGreaterThanOrEqual(1);
    // One stream id, sequence numbers counting up from 1.
    expect(new Set(ms.streamUpdates.map((u) => u.streamId)).size).toBe(1);
    expect(ms.streamUpdates.map((u) => u.sequence)).toEqual(ms.streamUpdates.map((_, i) => i + 1));
    expect(ms.activities[0]!.id).toBe(ms.streamUpdates[0]!.streamId);
    // Paced: Teams takes about one streaming request a second.
    const streamed = ms.callsOf('stream');
    for (let i = 1; i < streamed.length; i++) expect(streamed[i]!.at - streamed[i - 1]!.at).toBeGreaterThanOrEqual(1400);
    expect(ms.callsOf('token')).toHaveLength(1);
  });

  it('where Teams refuses the stream, the answer goes on as one message updated in place', async () => {
    ms.refuseStreams = true;
    await start(echo(100) + teamsChannel(ms));
    const text = words(30);
    await ms.post(ms.activity(text));
    await waitFor(() => ms.texts(DM)[0] === text, 15_000);
    await idle();
    expect(ms.texts(DM)).toEqual([text]);
    expect(ms.callsOf('stream')).toHaveLength(1);
    expect(ms.activities[0]!.updates).toBeGreaterThanOrEqual(1);
  });

  it("a stream past Teams' time limit goes on by updating the streamed message in place, not with a second message", async () => {
    // Past the second chunk (about 1.4 s in): the third gets 403 "exceeded streaming time".
    ms.streamLimitMs = 1_000;
    await start(echo(100) + teamsChannel(ms));
    const text = words(40);
    await ms.post(ms.activity(text));
    await waitFor(() => ms.texts(DM)[0] === text, 15_000);
    await idle();
    expect(ms.texts(DM)).toEqual([text]);
    expect(ms.activities).toHaveLength(1);
    expect(ms.callsOf('stream').length).toBeGreaterThanOrEqual(2);
    expect(ms.callsOf('update').length).toBeGreaterThanOrEqual(1);
    expect(ms.callsOf('send')).toHaveLength(0);
  });

  it('in channels and group chats: only mentions are answered, as a reply updated in place; <at> in answers is defused', async () => {
    await start(echo(100) + teamsChannel(ms));
    await ms.post(ms.activity('just chatting', { kind: 'channel' }));
    // The bot's own mention is taken out of the text; another <at> tag is read as plain @name.
    const mention = ms.activity(`hello ${words(20)} <at>Bob</at>`, { kind: 'channel', mention: true });
    await ms.post(mention);
    await waitFor(() => ms.texts(CHANNEL)[0] === `hello ${words(20)} @Bob`, 15_000);
    const [reply] = ms.activities;
    expect(reply!.replyToId).toBe(mention.id);
    expect(reply!.updates).toBeGreaterThanOrEqual(1);
    await ms.post(ms.activity('in the group', { kind: 'groupChat', mention: true }));
    await waitFor(() => ms.texts(GROUP)[0] === 'in the group', 10_000);
    await idle();
    expect(ms.activities).toHaveLength(2);
    // The unaddressed message was seen and judged (kept as context, no turn); the two mentions were stored.
    expect(d!.logs.entries().some((l) => l.msg === 'message received' && l.verdict === 'unaddressed')).toBe(true);
    expect(await received()).toBe(2);
  });

  it('refused before the body is used: no token, a wrong signature, expired, wrong audience or issuer, another serviceUrl → 401, nothing stored', async () => {
    await start(echo(0) + teamsChannel(ms));
    const a = () => ms.activity('sneaky');
    expect(await ms.post(a(), null)).toBe(401);
    expect(await ms.post(a(), 'not.a.jwt')).toBe(401);
    expect(await ms.post(a(), await ms.token({ stranger: true }))).toBe(401);
    expect(await ms.post(a(), await ms.token({ expiresInS: -600 }))).toBe(401);
    expect(await ms.post(a(), await ms.token({ claims: { aud: '99999999-2222-3333-4444-555555555555' } }))).toBe(401);
    expect(await ms.post(a(), await ms.token({ claims: { iss: 'https://evil.example.org' } }))).toBe(401);
    expect(await ms.post(a(), await ms.token({ claims: { serviceurl: 'https://evil.example.org/teams/' } }))).toBe(401);
    // Signed by the right key, but from another Bot Framework channel: 403 (a Teams channel takes msteams only).
    expect(await ms.post({ ...a(), channelId: 'webchat' })).toBe(403);
    // A body that is not even JSON, unsigned: 401 before it is read.
    const raw = await fetch(ms.webhook, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{not json' });
    expect(raw.status).toBe(401);
    expect(await received()).toBe(0);
    // A good one after them is answered, and it is the only one.
    expect(await ms.post(ms.activity('the real one'))).toBe(200);
    await waitFor(() => ms.texts(DM)[0] === 'the real one', 10_000);
    expect(await received()).toBe(1);
    expect(ms.calls.filter((c) => c.name === 'send' || c.name === 'stream' || c.name === 'reply').every((c) => c.body.text !== 'sneaky')).toBe(true);
  });

  it('signing keys that cannot be fetched: 503 (the Connector retries), nothing stored; then accepted', async () => {
    await start(echo(0) + teamsChannel(ms));
    ms.fail('keys', { status: 500 });
    const act = ms.activity('after the outage');
    expect(await ms.post(act)).toBe(503);
    expect(await received()).toBe(0);
    expect(await ms.post(act)).toBe(200);
    await waitFor(() => ms.texts(DM)[0] === 'after the outage', 10_000);
  });

  it('tenant_id: an activity from another tenant is refused (403) and not stored', async () => {
    await start(echo(0) + teamsChannel(ms, `tenant_id = "${TENANT}"\n`));
    const foreign = ms.activity('from elsewhere');
    foreign.conversation.tenantId = '12345678-1234-1234-1234-123456789012';
    foreign.channelData.tenant.id = '12345678-1234-1234-1234-123456789012';
    expect(await ms.post(foreign)).toBe(403);
    expect(await received()).toBe(0);
    expect(await ms.post(ms.activity('from home'))).toBe(200);
    await waitFor(() => ms.texts(DM)[0] === 'from home', 10_000);
    expect(ms.texts(DM)).toEqual(['from home']);
  });

  it('a redelivered activity is answered once', async () => {
    await start(echo(0) + teamsChannel(ms));
    const act = ms.activity('once please');
    expect(await ms.post(act)).toBe(200);
    expect(await ms.post(act)).toBe(200);
    await waitFor(() => ms.texts(DM)[0] === 'once please', 10_000);
    await idle();
    expect(ms.texts(DM)).toEqual(['once please']);
  });

  it('faults: 429 with Retry-After on updates is waited out; a 5xx on a send is retried; the text lands', async () => {
    await start(echo(100) + teamsChannel(ms));
    ms.fail('update', { status: 429, retryAfterS: 1 });
    ms.fail('reply', { status: 502 });
    await ms.post(ms.activity(words(50), { kind: 'groupChat', mention: true }));
    await waitFor(() => ms.texts(GROUP)[0] === words(50), 20_000);
    await idle();
    expect(ms.texts(GROUP)).toHaveLength(1);
    const updates = ms.callsOf('update');
    expect(updates.length).toBeGreaterThanOrEqual(2);
    expect(updates[1]!.at - updates[0]!.at).toBeGreaterThanOrEqual(900);
  });

  it('/stop mid-answer leaves one message ending with the marker', async () => {
    await start(echo(150) + teamsChannel(ms));
    await ms.post(ms.activity(words(60), { kind: 'groupChat', mention: true }));
    await waitFor(() => ms.texts(GROUP).length === 1, 10_000);
    await ms.post(ms.activity('/stop', { kind: 'groupChat', mention: true }));
    await waitFor(() => ms.texts(GROUP)[0]!.endsWith(STOP_MARKER), 10_000);
    await idle();
    expect(ms.texts(GROUP)).toHaveLength(1);
  });

  it('a long Markdown answer is split, code blocks intact', async () => {
    const llm = await withLlm();
    const code = Array.from({ length: 400 }, (_, i) => `console.log("line ${i} of the example");`).join('\n');
    // A model writing Teams' mention markup cannot mention anyone: the tag goes as text.
    const answer = `Here is **the script** for <at>everyone</at>.\n\n\`\`\`js\n${code}\n\`\`\`\n\nThat is all.`;
    expect(answer.length).toBeGreaterThan(10_000);
    llm.script({ kind: 'stream', chunks: answer.match(/[\s\S]{1,3000}/g)!.map((content) => ({ content })) });
    await start(llmAgent(llm.url) + teamsChannel(ms));
    await ms.post(ms.activity('write me a long script', { kind: 'groupChat', mention: true }));
    await waitFor(() => ms.texts(GROUP).join('').includes('That is all.'), 20_000);
    await idle();
    const texts = ms.texts(GROUP);
    expect(texts).toHaveLength(2);
    for (const t of texts) {
      expect(t.length).toBeLessThanOrEqual(10_000);
      expect(t.split('```').length % 2).toBe(1);
    }
    expect(texts[0]).toContain('**the script** for &lt;at>everyone&lt;/at>.');
    expect(texts[1]).toMatch(/^```js\n/);
  });

  it('an approval: Adaptive Card buttons, a click (Action.Submit) approves, the card is removed', async () => {
    const llm = await withLlm();
    const file = withCountingFile();
    await start(llmAgent(llm.url) + file.server() + teamsChannel(ms));
    await firstMcpConnected(d!);
    llm.script(file.edit(), say('Edited on Teams.'));
    await ms.post(ms.activity('edit the count', { kind: 'groupChat', mention: true }));
    const q = await waitFor(() => ms.activities.find((a) => a.attachments?.length), 20_000);
    expect(q.attachments![0]).toMatchObject({ contentType: 'application/vnd.microsoft.card.adaptive', content: { type: 'AdaptiveCard' } });
    expect(q.attachments![0].content.actions.map((x: { title: string; type: string }) => [x.type, x.title])).toEqual([
      ['Action.Submit', 'Approve'],
      ['Action.Submit', 'Deny'],
    ]);
    expect(await ms.click(q, 'Approve', undefined, 'groupChat')).toBe(200);
    await waitFor(() => ms.texts(GROUP).includes('Edited on Teams.'), 20_000);
    expect(file.runs).toBe(1);
    expect(q.text).toBe('✅ fs__edit_file: approved.');
    expect(q.attachments).toBeUndefined();
  });

  it('a refused app password parks the channel with CHANNEL_AUTH_FAILED', async () => {
    await start(echo(0) + teamsChannel(ms), teamsEnv(ms, 'wrong-password'));
    expect(d!.daemon.status().channels.find((c) => c.id === 'ms')).toMatchObject({
      state: 'failed',
      next_retry_at: null,
      last_error: { code: 'CHANNEL_AUTH_FAILED', message: expect.stringContaining('app id or password was refused') },
    });
    expect(ms.callsOf('token')).toHaveLength(1);
  });

  it("an inline image reaches the vision model, fetched with the bot's token from the Connector", async () => {
    const llm = await withLlm();
    llm.script({ kind: 'stream', chunks: [{ content: 'A small picture.' }] });
    const PHOTO = Buffer.from('ffd8ffe000104a46494600010100000100010000ffdb0043000806060706050806070709090808', 'hex');
    await start(
      `[agent]\nprovider = "openai-compatible"\nbase_url = "${llm.url}"\nmodel = "vision-1"\n\n[models."vision-1"]\ninput = ["text", "image"]\n\n${teamsChannel(ms)}`,
    );
    expect(await ms.post(ms.imageActivity('what is this?', PHOTO))).toBe(200);
    await waitFor(() => ms.texts(DM)[0] === 'A small picture.', 10_000);
    const fetched = ms.callsOf('attachment');
    expect(fetched).toHaveLength(1);
    expect(fetched[0]!.auth).toMatch(/^Bearer bot-token-/);
    const last = [...llm.requests[0]!.body.messages].reverse().find((m) => m.role === 'user')!;
    const parts = last.content as Array<{ type: string; text?: string; image_url?: { url: string } }>;
    expect(parts.find((p) => p.type === 'text')!.text).toContain('what is this?');
    expect(parts.find((p) => p.type === 'image_url')).toEqual({ type: 'image_url', image_url: { url: `data:image/jpeg;base64,${PHOTO.toString('base64')}` } });
  });
});
