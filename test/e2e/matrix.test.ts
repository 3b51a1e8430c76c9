import { beforeEach, describe, expect, it } from 'vitest';
import { formatStatus } from '../../src/actions/builtin/status.js';
import { STOP_MARKER } from '../../src/stream/reply-stream.js';
import type { FakeMatrix } from '../fakes/matrix/server.js';
import { say, withCountingFile } from '../helpers/approval.js';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChannelDaemon, withLlm } from '../helpers/fixtures.js';
import { matrixChannel, matrixEnv, withMatrix } from '../helpers/matrix.js';
import { firstMcpConnected } from '../helpers/mcp.js';
import { echoAgent as echo, llmAgent } from '../helpers/toml.js';

const words = (n: number) => Array.from({ length: n }, (_, i) => `word${i}`).join(' ');
/** Quick restarts after a transient failure, so fault tests stay short. */
const FAST_BACKOFF = 'backoff = { initial_ms = 50, max_ms = 200 }\n';

describe('Matrix channel against the fake homeserver', () => {
  let mx: FakeMatrix;
  let d: TestDaemon | undefined;
  beforeEach(async () => {
    mx = await withMatrix();
  });

  const start = async (body: string, env: NodeJS.ProcessEnv = matrixEnv(mx)) => (d = await withChannelDaemon(body, env));
  /** The channel is listening (its fresh first sync is done and stored). */
  const connected = () => waitFor(() => d!.daemon.status().channels.find((c) => c.id === 'mx')?.state === 'connected', 10_000);
  /** Every event so far was handed to the daemon and its position stored: nothing more can arrive. */
  const synced = () => waitFor(() => mx.syncedTo >= mx.position && d!.daemon.status().turns.in_flight === 0, 10_000);

  it('a DM is answered once, streamed as m.replace edits, in HTML, with typing and no pings', async () => {
    mx.dm('said before the bot started: history, not answered');
    await start(echo(150) + matrixChannel(mx));
    await connected();
    const text = `${words(20)} @room`;
    mx.dm(text);
    await waitFor(() => mx.texts(mx.dmRoom)[0]?.startsWith('word0') && mx.texts(mx.dmRoom)[0]!.endsWith('room'), 15_000);
    await synced();
    const [msg, ...others] = mx.messagesIn(mx.dmRoom);
    expect(others).toHaveLength(0);
    expect(msg!.edits).toBeGreaterThanOrEqual(1);
    // The edit carries the new text in m.new_content, rendered; @room cannot ping anyone.
    expect(msg!.shown).toMatchObject({ msgtype: 'm.text', format: 'org.matrix.custom.html', 'm.mentions': {} });
    expect(msg!.shown.body).toBe(text.replace('@room', '@\u2060room'));
    expect(msg!.shown.formatted_body).toContain('@\u2060room');
    const edit = mx.botMessages.find((m) => m.content['m.relates_to']?.rel_type === 'm.replace')!;
    expect(edit.content['m.relates_to'].event_id).toBe(msg!.eventId);
    expect(edit.content.body.startsWith('* ')).toBe(true);
    // The typing notice is taken off when the answer is complete, not left to time out.
    await waitFor(() => mx.typing.at(-1)?.typing === false);
  });

  it('ack_reaction: an m.annotation on the message while the turn runs, redacted once answered', async () => {
    await start(echo(100) + matrixChannel(mx, 'ack_reaction = "👀"\n'));
    await connected();
    const e = mx.dm(words(10));
    await waitFor(() => mx.reactions.some((r) => r.target === e.event_id && r.key === '👀'), 10_000);
    await waitFor(() => mx.texts(mx.dmRoom)[0] === words(10), 10_000);
    await waitFor(() => mx.reactions[0]!.redacted, 10_000);
    expect(mx.reactions).toHaveLength(1);
  });

  it('in a room: unaddressed messages are ignored; a mention or a reply to the bot is answered as a reply', async () => {
    await start(echo(0) + matrixChannel(mx));
    await connected();
    mx.group('just chatting');
    const mention = mx.group('hello bot', { mention: true });
    await waitFor(() => mx.texts(mx.groupRoom)[0] === `${mx.displayName}: hello bot`, 10_000);
    const [reply] = mx.messagesIn(mx.groupRoom);
    expect(reply!.content['m.relates_to']).toEqual({ 'm.in_reply_to': { event_id: mention.event_id } });
    mx.group('and this too', { replyTo: reply!.eventId });
    await waitFor(() => mx.texts(mx.groupRoom)[1] === 'and this too', 10_000);
    // A mention in a thread is answered in the thread.
    const inThread = mx.group('in the thread', { mention: true, thread: mention.event_id });
    await waitFor(() => mx.texts(mx.groupRoom)[2] === `${mx.displayName}: in the thread`, 10_000);
    expect(mx.messagesIn(mx.groupRoom)[2]!.content['m.relates_to']).toEqual({
      rel_type: 'm.thread',
      event_id: mention.event_id,
      is_falling_back: false,
      'm.in_reply_to': { event_id: inThread.event_id },
    });
    await synced();
    expect(mx.messagesIn(mx.groupRoom)).toHaveLength(3);
    expect(d!.logs.entries().some((l) => l.msg === 'message received' && l.verdict === 'unaddressed')).toBe(true);
  });

  it('a room not in `rooms` is not served', async () => {
    mx.encrypt('!unused:fake.test'); // any joined room outside the list
    await start(echo(0) + matrixChannel(mx, 'require_mention = false\n').replace(`rooms = ["${mx.groupRoom}"]`, 'rooms = []'));
    await connected();
    mx.group('anyone?');
    mx.dm('hi');
    await waitFor(() => mx.texts(mx.dmRoom)[0] === 'hi', 10_000);
    await synced();
    expect(mx.texts(mx.groupRoom)).toEqual([]);
    expect(mx.texts('!unused:fake.test')).toEqual([]);
  });

  it('a long Markdown answer is split into messages with intact, highlighted code blocks', async () => {
    const llm = await withLlm();
    const code = Array.from({ length: 300 }, (_, i) => `console.log("line ${i} of the example");`).join('\n');
    const answer = `Here is **the script**.\n\n\`\`\`js\n${code}\n\`\`\`\n\nThat is all.`;
    expect(answer.length).toBeGreaterThan(10_000);
    // The first piece takes a while: the room shows the bot typing meanwhile.
    llm.script({ kind: 'stream', chunks: answer.match(/[\s\S]{1,2000}/g)!.map((content, i) => ({ content, delayMs: i === 0 ? 600 : 0 })) });
    await start(llmAgent(llm.url) + matrixChannel(mx));
    await connected();
    mx.dm('write me a long script');
    await waitFor(() => mx.texts(mx.dmRoom).join('').includes('That is all.'), 20_000);
    expect(mx.typing.some((t) => t.roomId === mx.dmRoom && t.typing)).toBe(true);
    const shown = mx.messagesIn(mx.dmRoom).map((m) => m.shown);
    expect(shown).toHaveLength(2);
    for (const s of shown) {
      expect(s.body.length).toBeLessThanOrEqual(8000);
      expect(s.formatted_body.split('<pre>').length).toBe(s.formatted_body.split('</pre>').length);
    }
    expect(shown[0]!.formatted_body).toContain('<strong>the script</strong>');
    expect(shown[0]!.formatted_body).toContain('<pre><code class="language-js">');
    expect(shown[1]!.formatted_body).toMatch(/^<pre><code class="language-js">/);
    const visible = mx.texts(mx.dmRoom).join('\n');
    for (let i = 0; i < 300; i++) expect(visible).toContain(`console.log("line ${i} of the example");`);
  });

  it('/stop mid-stream leaves one message, ending with the marker', async () => {
    await start(echo(150) + matrixChannel(mx));
    await connected();
    mx.dm(words(60));
    await waitFor(() => mx.messagesIn(mx.dmRoom).length === 1, 10_000);
    mx.dm('/stop');
    await waitFor(() => mx.texts(mx.dmRoom)[0]!.endsWith(STOP_MARKER), 10_000);
    await synced();
    expect(mx.texts(mx.dmRoom)).toHaveLength(1);
  });

  it('an approval is answered by typing /approve; the call runs once', async () => {
    const llm = await withLlm();
    const file = withCountingFile();
    d = await withChannelDaemon(llmAgent(llm.url) + file.server() + matrixChannel(mx), matrixEnv(mx));
    await firstMcpConnected(d);
    llm.script(file.edit(), say('Edited on Matrix.'));
    mx.dm('edit the count');
    const q = await waitFor(() => mx.messagesIn(mx.dmRoom).find((m) => /\/approve [0-9a-f]+/.test(m.shown.body)), 20_000);
    const id = /\/approve ([0-9a-f]+)/.exec(q.shown.body)![1];
    mx.dm(`/approve ${id}`);
    await waitFor(() => mx.texts(mx.dmRoom).includes('Edited on Matrix.'), 20_000);
    expect(file.runs).toBe(1);
    expect(q.shown.body).toBe('✅ fs__edit_file: approved.');
  });

  it('a refused token parks the channel as failed with CHANNEL_AUTH_FAILED', async () => {
    await start(echo(0) + matrixChannel(mx), matrixEnv(mx, 'syt_wrong'));
    expect(d!.daemon.status().channels.find((c) => c.id === 'mx')).toMatchObject({
      state: 'failed',
      next_retry_at: null,
      last_error: { code: 'CHANNEL_AUTH_FAILED', message: expect.stringContaining('access token was refused') },
    });
    expect(mx.callsOf('whoami')).toHaveLength(1);
    expect(mx.callsOf('sync')).toHaveLength(0);
  });

  it('a token of another account than user_id parks the channel, naming both', async () => {
    await start(echo(0) + matrixChannel(mx).replace(`user_id = "${mx.userId}"`, 'user_id = "@someone-else:fake.test"'));
    expect(d!.daemon.status().channels.find((c) => c.id === 'mx')).toMatchObject({
      state: 'failed',
      last_error: { code: 'CHANNEL_AUTH_FAILED', message: expect.stringContaining(`belongs to ${mx.userId}, not to user_id @someone-else:fake.test`) },
    });
    expect(mx.callsOf('sync')).toHaveLength(0);
  });

  it('faults: 429 on send is waited out, a 5xx or a dropped /sync is retried, a redelivered event is answered once', async () => {
    await start(echo(0) + matrixChannel(mx, FAST_BACKOFF));
    await connected();
    mx.fail('send', { status: 429, retryAfterMs: 300 });
    mx.dm('first');
    await waitFor(() => mx.texts(mx.dmRoom)[0] === 'first', 10_000);
    const sends = mx.callsOf('send');
    expect(sends.length).toBeGreaterThanOrEqual(2);
    expect(sends[1]!.at - sends[0]!.at).toBeGreaterThanOrEqual(250);

    mx.fail('sync', { status: 502 });
    mx.fail('sync', { drop: true });
    mx.fail('sync', { status: 429, retryAfterMs: 200 });
    mx.dm('second');
    await waitFor(() => mx.texts(mx.dmRoom)[1] === 'second', 10_000);

    mx.redeliverNext();
    mx.dm('third');
    await waitFor(() => mx.texts(mx.dmRoom)[2] === 'third', 10_000);

    // The homeserver took the message but its answer was lost: the retry carries the same
    // transaction id, so the homeserver answers with the first event and posts nothing new.
    mx.fail('send', { dropAnswer: true });
    mx.dm('fourth');
    await waitFor(() => mx.callsOf('send').length >= sends.length + 4 && mx.texts(mx.dmRoom)[3] === 'fourth', 10_000);
    await synced();
    expect(mx.texts(mx.dmRoom)).toEqual(['first', 'second', 'third', 'fourth']);
    const last = mx.callsOf('send').slice(-2);
    expect(new Set(last.map((c) => c.path)).size).toBe(1);
  });

  it('an encrypted room gets one notice, not silence, and nothing is answered there', async () => {
    await start(echo(0) + matrixChannel(mx));
    await connected();
    mx.encrypt(mx.groupRoom);
    mx.post(mx.groupRoom, { algorithm: 'm.megolm.v1.aes-sha2', ciphertext: 'AwgA' }, mx.alice, 'm.room.encrypted');
    await waitFor(() => mx.messagesIn(mx.groupRoom).length === 1, 10_000);
    mx.post(mx.groupRoom, { algorithm: 'm.megolm.v1.aes-sha2', ciphertext: 'AwgB' }, mx.alice, 'm.room.encrypted');
    await synced();
    const [notice] = mx.messagesIn(mx.groupRoom);
    expect(notice!.content.msgtype).toBe('m.notice');
    expect(notice!.content.body).toContain('end-to-end encrypted');
    expect(mx.messagesIn(mx.groupRoom)).toHaveLength(1);
    // The operator sees it in /status, under the channel.
    const st = (await (await fetch(`${d!.url}/status`)).json()) as { channels: Array<{ id: string; notes?: string[] }> };
    expect(st.channels.find((c) => c.id === 'mx')!.notes).toEqual([`room ${mx.groupRoom} is end-to-end encrypted: not served (the room was told once)`]);
    expect(formatStatus(d!.daemon.status())).toContain(`channel mx: room ${mx.groupRoom} is end-to-end encrypted`);
  });

  it('auto_join: a direct invite from an allowed user is joined and kept in m.direct; others are not', async () => {
    await start(echo(0) + matrixChannel(mx, 'auto_join = true\n').replace('allow_from = ["*"]', `allow_from = ["${mx.alice}"]`));
    await connected();
    mx.invite('!stranger:fake.test', '@mallory:fake.test', true);
    mx.invite('!new:fake.test', mx.alice, true);
    await waitFor(() => (mx.accountData('m.direct') as Record<string, string[]>)[mx.alice]!.length === 2, 10_000);
    expect(mx.joined('!new:fake.test')).toBe(true);
    expect(mx.accountData('m.direct')).toEqual({ [mx.alice]: [mx.dmRoom, '!new:fake.test'] });
    mx.post('!new:fake.test', { msgtype: 'm.text', body: 'hi in the new room' });
    await waitFor(() => mx.texts('!new:fake.test')[0] === 'hi in the new room', 10_000);
    expect(mx.joined('!stranger:fake.test')).toBe(false);
  });
});

describe('Matrix files: authenticated media (v1.11), the legacy media API on older servers', () => {
  const PHOTO = Buffer.from('ffd8ffe000104a46494600010100000100010000ffdb0043000806060706050806070709090808', 'hex');
  const agent = (url: string) =>
    `[agent]\nprovider = "openai-compatible"\nbase_url = "${url}"\nmodel = "vision-1"\n\n[models."vision-1"]\ninput = ["text", "image"]\n\n`;

  for (const authenticated of [true, false]) {
    it(`an image with a caption reaches the vision model (${authenticated ? '/_matrix/client/v1/media' : '/_matrix/media/v3'})`, async () => {
      const mx = await withMatrix();
      mx.authenticatedMedia = authenticated;
      const llm = await withLlm();
      llm.script({ kind: 'stream', chunks: [{ content: 'A small picture.' }] });
      const d = await withChannelDaemon(agent(llm.url) + matrixChannel(mx), matrixEnv(mx));
      await waitFor(() => d.daemon.status().channels[0]!.state === 'connected', 10_000);
      mx.dmFile(PHOTO, { name: 'cat.jpg', mime: 'image/jpeg', caption: 'what is this?' });
      await waitFor(() => mx.texts(mx.dmRoom)[0] === 'A small picture.', 10_000);
      const media = mx.callsOf('media');
      expect(media).toHaveLength(1);
      expect(media[0]!.path.startsWith(authenticated ? '/_matrix/client/v1/media/download/' : '/_matrix/media/v3/download/')).toBe(true);
      const last = [...llm.requests[0]!.body.messages].reverse().find((m) => m.role === 'user')!;
      const parts = last.content as Array<{ type: string; text?: string; image_url?: { url: string } }>;
      expect(parts.find((p) => p.type === 'text')!.text).toContain('what is this?');
      expect(parts.find((p) => p.type === 'image_url')).toEqual({
        type: 'image_url',
        image_url: { url: `data:image/jpeg;base64,${PHOTO.toString('base64')}` },
      });
    });
  }
});
