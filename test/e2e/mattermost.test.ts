import { beforeEach, describe, expect, it } from 'vitest';
import { STOP_MARKER } from '../../src/stream/reply-stream.js';
import type { FakeMattermost } from '../fakes/mattermost/server.js';
import { say, withCountingFile } from '../helpers/approval.js';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChannelDaemon, withLlm } from '../helpers/fixtures.js';
import { failNextInboxAdd } from '../helpers/inbox-faults.js';
import { mattermostChannel, mattermostEnv, withMattermost } from '../helpers/mattermost.js';
import { firstMcpConnected } from '../helpers/mcp.js';
import { echoAgent as echo, llmAgent, webchatChannel } from '../helpers/toml.js';
import { ChatClient } from '../helpers/webchat-client.js';

const words = (n: number, p = 'w') => Array.from({ length: n }, (_, i) => `${p}${i}`).join(' ');

describe('Mattermost channel against the fake server', () => {
  let mm: FakeMattermost;
  let d: TestDaemon | undefined;
  beforeEach(async () => {
    mm = await withMattermost();
  });

  const start = async (body: string, env: NodeJS.ProcessEnv = mattermostEnv(mm)) => {
    d = await withChannelDaemon(body, env);
    return d;
  };
  const connected = () => waitFor(() => mm.connected && d!.daemon.status().channels.find((c) => c.id === 'mm')?.state === 'connected', 10_000);
  const idle = () => waitFor(() => d!.daemon.status().turns.in_flight === 0 && d!.daemon.status().turns.queued === 0, 15_000);
  const received = async () => (await d!.daemon.metrics.received.get()).values.reduce((n, v) => n + v.value, 0);

  it('a DM is answered once, drafted by patches and finished in place; a threaded post is answered in its thread', async () => {
    await start(echo(120) + mattermostChannel(mm));
    await connected();
    mm.userPost(words(15));
    await waitFor(() => mm.texts(mm.dm.id)[0] === words(15), 15_000);
    const [reply] = mm.botPosts(mm.dm.id);
    expect(reply!.edits).toBeGreaterThanOrEqual(1);
    expect(reply!.root_id).toBe('');
    expect(mm.callsOf('create')).toHaveLength(1);
    const root = mm.userPost('a thread starts');
    await waitFor(() => mm.texts(mm.dm.id).length === 2, 10_000);
    mm.userPost('in the thread', { rootId: root.id });
    await waitFor(() => mm.texts(mm.dm.id).includes('in the thread'), 10_000);
    expect(mm.botPosts(mm.dm.id).find((p) => p.message === 'in the thread')!.root_id).toBe(root.id);
  });

  it('in channels only mentions are answered; teams/channels allowlists keep other channels out', async () => {
    await start(echo(0) + mattermostChannel(mm, 'teams = ["acme"]\nchannels = ["town-square"]\n'));
    await connected();
    mm.userPost('just chatting', { channel: mm.town });
    mm.userPost('hello there', { channel: mm.offTopic, mention: true });
    mm.userPost('hello bot', { channel: mm.town, mention: true });
    await waitFor(() => mm.texts(mm.town.id)[0] === 'hello bot', 10_000);
    await waitFor(() => d!.logs.entries().some((l) => l.msg === 'message received' && l.verdict === 'unaddressed'));
    await idle();
    expect(mm.texts(mm.offTopic.id)).toEqual([]);
    expect(mm.texts(mm.town.id)).toEqual(['hello bot']);
    expect(await received()).toBe(1);
  });

  it('a long Markdown answer is split at 16383 with intact code blocks; @channel, @all and @here never notify', async () => {
    const llm = await withLlm();
    const code = Array.from({ length: 500 }, (_, i) => `console.log("line ${i} of the example");`).join('\n');
    const answer = `Hey @channel and @all and @here, **look**:\n\n\`\`\`js\n${code}\n\`\`\`\n\nThat is all.`;
    expect(answer.length).toBeGreaterThan(16_383);
    llm.script({ kind: 'stream', chunks: answer.match(/[\s\S]{1,4000}/g)!.map((content) => ({ content })) });
    await start(llmAgent(llm.url) + mattermostChannel(mm));
    await connected();
    mm.userPost('write it all');
    await waitFor(() => mm.texts(mm.dm.id).join('').includes('That is all.'), 15_000);
    await idle();
    const texts = mm.texts(mm.dm.id);
    expect(texts).toHaveLength(2);
    for (const t of texts) {
      expect(t.length).toBeLessThanOrEqual(16_383);
      expect(t.split('```').length % 2).toBe(1);
    }
    expect(texts[0]).toMatch(/^Hey @\u2060channel and @\u2060all and @\u2060here, \*\*look\*\*:/);
    const all = texts.join('\n');
    for (let i = 0; i < 500; i++) expect(all).toContain(`console.log("line ${i} of the example");`);
  });

  it('" /stop" (a space first, as Mattermost clients need) stops the answer: one post with the marker', async () => {
    await start(echo(150) + mattermostChannel(mm));
    await connected();
    mm.userPost(words(60));
    await waitFor(() => mm.texts(mm.dm.id).length === 1, 10_000);
    mm.userPost(' /stop');
    await waitFor(() => mm.texts(mm.dm.id)[0]!.endsWith(STOP_MARKER), 10_000);
    await idle();
    expect(mm.texts(mm.dm.id)).toHaveLength(1);
    expect(mm.texts(mm.dm.id)[0]).not.toContain('w59');
  });

  it('a dropped socket, a gap in seq and a redelivered event: every post answered once, missed ones caught up over REST', async () => {
    await start(echo(0) + mattermostChannel(mm));
    await connected();
    const first = mm.userPost('first');
    await waitFor(() => mm.texts(mm.dm.id).includes('first'), 10_000);
    // The same event again (with the next seq): the inbox knows its post id.
    mm.broadcast(mm.postedEvent(first, 'ada'));
    mm.drop();
    await waitFor(() => !mm.connected);
    mm.userPost('while away');
    await waitFor(() => mm.connections === 2, 10_000);
    await waitFor(() => mm.texts(mm.dm.id).includes('while away'), 10_000);
    // A gap in seq: the client reconnects and catches up.
    mm.skipSeq();
    mm.userPost('after a gap');
    await waitFor(() => mm.connections === 3, 10_000);
    await waitFor(() => mm.texts(mm.dm.id).includes('after a gap'), 10_000);
    await idle();
    expect(mm.texts(mm.dm.id).sort()).toEqual(['after a gap', 'first', 'while away']);
    expect(mm.callsOf('since').length).toBeGreaterThanOrEqual(1);
  });

  it('a post that cannot be stored is not lost: the listener restarts and catches it up', async () => {
    await start(echo(0) + mattermostChannel(mm));
    await connected();
    failNextInboxAdd(d!);
    mm.userPost('store me');
    await waitFor(() => mm.texts(mm.dm.id).includes('store me'), 15_000);
    await idle();
    expect(mm.texts(mm.dm.id)).toEqual(['store me']);
    expect(mm.connections).toBe(2);
  });

  it('429 with Retry-After on patches, a 5xx on create, a dropped connection on typing: each answer lands once', async () => {
    await start(echo(40) + mattermostChannel(mm));
    await connected();
    mm.fail('patch', { status: 429, retryAfter: 1 }, 2);
    mm.userPost(words(40));
    await waitFor(() => mm.texts(mm.dm.id)[0] === words(40), 20_000);
    await idle();
    expect((await d!.daemon.metrics.rateLimited.get()).values.map((v) => v.value)).toEqual([2]);
    mm.fail('create', { status: 503 });
    mm.fail('typing', { drop: true });
    mm.userPost('short one');
    await waitFor(() => mm.texts(mm.dm.id)[1] === 'short one', 20_000);
    await idle();
    expect(mm.texts(mm.dm.id)).toEqual([words(40), 'short one']);
  });

  it('approval: the question names the commands; " /approve ID" runs the tool once', async () => {
    const llm = await withLlm();
    const file = withCountingFile();
    await start(llmAgent(llm.url) + file.server() + mattermostChannel(mm));
    await firstMcpConnected(d!);
    await connected();
    llm.script(file.edit(), say('Edited on Mattermost.'));
    mm.userPost('edit the count');
    const q = await waitFor(() => mm.botPosts(mm.dm.id).find((p) => p.message.includes('/approve')), 20_000);
    expect(q.message).toContain('fs__edit_file');
    const command = /` (\/approve \w+)`/.exec(q.message)![1]!;
    mm.userPost(` ${command}`, { user: mm.bob });
    await waitFor(() => mm.texts(mm.dm.id).includes('Only the person who asked, or an approver, can decide this.'), 10_000);
    mm.userPost(` ${command}`);
    await waitFor(() => mm.texts(mm.dm.id).includes('Edited on Mattermost.'), 20_000);
    expect(file.runs).toBe(1);
    expect(mm.posts.get(q.id)!.message).toBe('✅ fs__edit_file: approved.');
  });

  it('an attachment is fetched from /api/v4/files/{id} with the token', async () => {
    const llm = await withLlm();
    llm.script({ kind: 'stream', chunks: [{ content: 'Read it.' }] });
    await start(llmAgent(llm.url) + mattermostChannel(mm));
    await connected();
    mm.files.set('file1', Buffer.from('hello from a file\n'));
    mm.userPost('what does it say?', { files: { files: [{ id: 'file1', name: 'note.txt', extension: 'txt', size: 18, mime_type: 'text/plain' }] } });
    await waitFor(() => mm.texts(mm.dm.id)[0] === 'Read it.', 10_000);
    expect(JSON.stringify(llm.requests[0]!.body.messages)).toContain('hello from a file');
  });

  it('a refused token parks the channel with CHANNEL_AUTH_FAILED while a web chat keeps answering', async () => {
    await start(`${echo(0)}${mattermostChannel(mm)}\n${webchatChannel()}`, mattermostEnv(mm, 'wrong-token'));
    expect(d!.daemon.status().channels.find((c) => c.id === 'mm')).toMatchObject({
      state: 'failed',
      next_retry_at: null,
      last_error: { code: 'CHANNEL_AUTH_FAILED', message: expect.stringContaining('token was refused') },
    });
    expect(mm.connections).toBe(0);
    const c = new ChatClient(d!.url, 'tab');
    await c.opened;
    c.send('web still works');
    expect((await c.finals())[0]!.text).toBe('web still works');
    c.close();
  });
});
