import { beforeEach, describe, expect, it } from 'vitest';
import type { FakeLlm, RecordedRequest } from '../fakes/llm/server.js';
import type { FakeDiscord } from '../fakes/discord/server.js';
import type { FakeSlack } from '../fakes/slack/server.js';
import type { FakeTelegram } from '../fakes/telegram/server.js';
import { request } from 'node:http';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChannelDaemon, withChat, withDaemon, withLlm } from '../helpers/fixtures.js';
import {
  discordChannel,
  discordEnv,
  slackChannel,
  slackEnv,
  telegramChannel,
  telegramEnv,
  withDiscord,
  withSlack,
  withTelegram,
} from '../helpers/platforms.js';
import { webchatChannel } from '../helpers/toml.js';

/** A tiny JPEG-looking payload: the bytes only need to survive the trip. */
const PHOTO = Buffer.from('ffd8ffe000104a46494600010100000100010000ffdb0043000806060706050806070709090808', 'hex');

/** The last user message of a request, as content parts. */
function userParts(req: RecordedRequest): Array<{ type: string; text?: string; image_url?: { url: string } }> {
  const last = [...req.body.messages].reverse().find((m) => m.role === 'user')!;
  return typeof last.content === 'string' ? [{ type: 'text', text: last.content }] : (last.content as never);
}

/** An agent on the fake LLM; `vision-1` sees images, `text-1` reads text only. */
const agentConfig = (url: string, model = 'vision-1') =>
  `[agent]\nprovider = "openai-compatible"\nbase_url = "${url}"\nmodel = "${model}"\n\n[models."vision-1"]\ninput = ["text", "image"]\n\n[models."text-1"]\ninput = ["text"]\n\n`;

describe('attachments on Telegram: getFile, then /file/bot<token>/<file_path>', () => {
  let tg: FakeTelegram;
  let llm: FakeLlm;
  beforeEach(async () => {
    tg = await withTelegram();
    llm = await withLlm();
  });

  const start = async (model = 'vision-1') => {
    await withChannelDaemon(agentConfig(llm.url, model) + telegramChannel(tg), telegramEnv(tg));
  };

  it('a photo without a caption is a turn: the largest size reaches the vision model as an image part', async () => {
    llm.script({ kind: 'stream', chunks: [{ content: 'A small picture.' }] });
    await start();
    tg.dmPhoto(PHOTO);
    await waitFor(() => tg.texts(42)[0] === 'A small picture.', 10_000);
    expect(tg.callsOf('getFile')).toHaveLength(1);
    expect(tg.downloads).toEqual(['documents/file_2.jpg']);
    const parts = userParts(llm.requests[0]!);
    expect(parts[0]).toMatchObject({ type: 'text' });
    expect(parts[0]!.text).toContain('without a caption');
    expect(parts[1]).toEqual({ type: 'image_url', image_url: { url: `data:image/jpeg;base64,${PHOTO.toString('base64')}` } });
  });

  it('a text file becomes text; a 50 MB file is refused before download with a message', async () => {
    await start();
    tg.dmDocument(Buffer.from('name,qty\napples,3\n'), { file_name: 'stock.csv', mime_type: 'text/csv' }, 'what is in stock?');
    await waitFor(() => llm.requests.length === 1, 10_000);
    const text = userParts(llm.requests[0]!)
      .map((p) => p.text)
      .join('\n');
    expect(text).toContain('what is in stock?');
    expect(text).toContain('<file name="stock.csv">\nname,qty\napples,3\n');
    await waitFor(() => tg.texts(42).length === 1, 10_000);

    tg.dmDocument(Buffer.from('x'), { file_name: 'huge.log', mime_type: 'text/plain', size: 50 * 1024 * 1024 });
    await waitFor(() => tg.texts(42).length === 2, 10_000);
    expect(tg.texts(42)[1]).toMatch(/^ℹ️ huge\.log \(50\.0 MB\) is larger than the 10\.0 MB limit, so it was not read\./);
    // Neither getFile nor the file itself was asked for.
    expect(tg.callsOf('getFile')).toHaveLength(1);
    expect(tg.downloads).toHaveLength(1);
    expect(userParts(llm.requests[1]!)[0]!.text).toContain('[attachment: huge.log (text/plain, 50.0 MB); too large to read]');
  });

  it('an image to a text-only model gets a one-line note in the answer, and the model hears what was sent', async () => {
    llm.script({ kind: 'stream', chunks: [{ content: 'I cannot see it.' }] });
    await start('text-1');
    tg.dmPhoto(PHOTO, 'look');
    await waitFor(() => tg.texts(42)[0]?.endsWith('I cannot see it.'), 10_000);
    expect(tg.texts(42)[0]).toBe('ℹ️ text-1 reads text only, so it did not see photo.\n\nI cannot see it.');
    expect(tg.downloads).toHaveLength(0);
    const parts = userParts(llm.requests[0]!);
    expect(parts).toHaveLength(1);
    expect(parts[0]!.text).toContain('look');
    expect(parts[0]!.text).toContain('not shown: this model reads text only');
  });
});

describe('attachments on Discord: the attachment CDN URL', () => {
  let dc: FakeDiscord;
  let llm: FakeLlm;
  beforeEach(async () => {
    dc = await withDiscord();
    llm = await withLlm();
  });

  it('an image without text reaches the vision model as an image part; a 50 MB file is never fetched', async () => {
    llm.script({ kind: 'stream', chunks: [{ content: 'Nice image.' }] });
    await withChannelDaemon(agentConfig(llm.url) + discordChannel(dc), discordEnv(dc));
    dc.dmWithFile('', { bytes: PHOTO, filename: 'cat.jpg', content_type: 'image/jpeg' });
    await waitFor(() => dc.texts(dc.dmChannel)[0] === 'Nice image.', 10_000);
    expect(dc.cdnDownloads).toHaveLength(1);
    expect(userParts(llm.requests[0]!)[1]).toEqual({ type: 'image_url', image_url: { url: `data:image/jpeg;base64,${PHOTO.toString('base64')}` } });

    dc.dmWithFile('read this', { bytes: Buffer.from('x'), filename: 'big.png', content_type: 'image/png', size: 50 * 1024 * 1024 });
    await waitFor(() => dc.texts(dc.dmChannel).length === 2, 10_000);
    expect(dc.texts(dc.dmChannel)[1]).toMatch(/^ℹ️ big\.png \(50\.0 MB\) is larger than the 10\.0 MB limit/);
    expect(dc.cdnDownloads).toHaveLength(1);
  });
});

describe('attachments on Slack: url_private with the bot token', () => {
  let sl: FakeSlack;
  let llm: FakeLlm;
  beforeEach(async () => {
    sl = await withSlack();
    llm = await withLlm();
  });

  it('an image without text reaches the vision model as an image part; a text file becomes text', async () => {
    llm.script({ kind: 'stream', chunks: [{ content: 'Seen.' }] }, { kind: 'stream', chunks: [{ content: 'Read.' }] });
    await withChannelDaemon(agentConfig(llm.url) + slackChannel(sl, 'native_stream = false\n'), slackEnv(sl));
    sl.push(sl.dmFileEvent('', { bytes: PHOTO, name: 'shot.jpg', mimetype: 'image/jpeg', filetype: 'jpg' }));
    await waitFor(() => sl.texts('D0DM0001')[0] === 'Seen.', 15_000);
    expect(sl.fileDownloads).toEqual([{ path: expect.stringMatching(/shot\.jpg$/), authorized: true }]);
    expect(userParts(llm.requests[0]!)[1]).toEqual({ type: 'image_url', image_url: { url: `data:image/jpeg;base64,${PHOTO.toString('base64')}` } });

    sl.push(sl.dmFileEvent('summarize', { bytes: Buffer.from('# Notes\nship it\n'), name: 'notes.md', mimetype: 'text/plain', filetype: 'markdown' }));
    await waitFor(() => sl.texts('D0DM0001').length === 2, 15_000);
    expect(userParts(llm.requests[1]!)[0]!.text).toContain('summarize\n\n<file name="notes.md">\n# Notes\nship it\n');
  });
});

describe('attachments in the web chat: upload, then a message naming it', () => {
  let llm: FakeLlm;
  let d: TestDaemon | undefined;
  beforeEach(async () => {
    llm = await withLlm();
  });

  const upload = async (bytes: Buffer, name: string, mime: string) => {
    const r = await fetch(`${d!.url}/webchat/web/upload?tab=t1`, {
      method: 'POST',
      headers: { 'content-type': mime, 'x-file-name': encodeURIComponent(name) },
      body: bytes,
    });
    expect(r.status).toBe(200);
    return (await r.json()) as { id: string; name: string; mime: string; size: number };
  };

  it('an uploaded image without text reaches the vision model; the file stays under state_dir; 50 MB is refused before the body is read', async () => {
    llm.script({ kind: 'stream', chunks: [{ content: 'A picture.' }] });
    d = await withDaemon(agentConfig(llm.url) + webchatChannel());
    const c = await withChat(d, 't1');
    const up = await upload(PHOTO, 'me.jpg', 'image/jpeg');
    expect(up).toMatchObject({ name: 'me.jpg', mime: 'image/jpeg', size: PHOTO.length });
    expect(readdirSync(join(d.dir, 'state', 'uploads', 'web'))).toEqual([up.id]);
    c.send('', 'img1', [{ id: up.id, name: up.name, mime: up.mime }]);
    const [final] = await c.finals(1);
    expect(final!.text).toBe('A picture.');
    expect(userParts(llm.requests[0]!)[1]).toEqual({ type: 'image_url', image_url: { url: `data:image/jpeg;base64,${PHOTO.toString('base64')}` } });

    // A declared 50 MB body is answered 413 without the body ever being sent.
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        `${d!.url}/webchat/web/upload?tab=t1`,
        { method: 'POST', headers: { 'content-type': 'image/png', 'content-length': String(50 * 1024 * 1024) } },
        (res) => {
          res.resume();
          resolve(res.statusCode!);
          req.destroy();
        },
      );
      req.on('error', reject);
      req.flushHeaders();
    });
    expect(status).toBe(413);
    // An id that is not an upload is not a file anywhere.
    c.send('look', 'img2', [{ id: '../../channeld.db', name: 'x.jpg', mime: 'image/jpeg' }]);
    await c.finals(2);
    expect(userParts(llm.requests[1]!)).toEqual([{ type: 'text', text: 'look' }]);
  });
});
