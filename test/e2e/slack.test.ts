import { beforeEach, describe, expect, it } from 'vitest';
import { signSlack, type FakeSlack } from '../fakes/slack/server.js';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChannelDaemon, withLlm } from '../helpers/fixtures.js';
import { failNextInboxAdd } from '../helpers/inbox-faults.js';
import { slackChannel, slackEnv, slackHttpChannel, withSlack } from '../helpers/platforms.js';
import { echoAgent as echo, llmAgent } from '../helpers/toml.js';
import { ChatClient } from '../helpers/webchat-client.js';

describe('Slack channel against the fake Slack', () => {
  let sl: FakeSlack;
  let d: TestDaemon | undefined;
  beforeEach(async () => {
    sl = await withSlack();
  });

  const socket = (extra = '') => slackChannel(sl, extra);
  const http = (extra = '') => slackHttpChannel(sl, extra);
  const env = () => slackEnv(sl, 'signing-secret-123');
  const start = async (body: string, e: NodeJS.ProcessEnv = env()) => (d = await withChannelDaemon(body, e));
  const words = (n: number, p = 'w') => Array.from({ length: n }, (_, i) => `${p}${i}`).join(' ');

  it('a DM and a channel mention stream through native chat streams and finish in the thread', async () => {
    await start(echo(100) + socket());
    const dm = sl.dmEvent(words(12, 'd'));
    const mention = sl.mentionEvent(words(12, 'c'));
    sl.push(dm);
    sl.push(mention);
    await waitFor(() => sl.texts('D0DM0001')[0] === words(12, 'd') && sl.texts('C0CHAN001')[0] === words(12, 'c'), 15_000);
    const [dmReply] = sl.messages.filter((m) => m.channel === 'D0DM0001');
    const [chReply] = sl.messages.filter((m) => m.channel === 'C0CHAN001');
    expect(dmReply).toMatchObject({ threadTs: dm.ts, stream: { stopped: true } });
    expect(chReply).toMatchObject({ threadTs: mention.ts, stream: { stopped: true } });
    expect(chReply!.stream!.chunks.length).toBeGreaterThanOrEqual(2);
    expect(sl.callsOf('chat.update')).toHaveLength(0);
  });

  it('a failing chat.startStream falls back to post + update with the full text', async () => {
    sl.fail('chat.startStream', { error: 'not_allowed' });
    await start(echo(60) + socket());
    sl.push(sl.mentionEvent(words(20)));
    await waitFor(() => sl.texts('C0CHAN001')[0] === words(20), 15_000);
    expect(sl.messages.filter((m) => m.channel === 'C0CHAN001')).toHaveLength(1);
    // One post (after this fake, an older API, refused markdown_text once).
    expect(sl.callsOf('chat.postMessage').filter((c) => c.args.text)).toHaveLength(1);
    expect((await d!.daemon.metrics.streamFallbacks.get()).values[0]!.value).toBe(1);
  });

  it('an envelope is not acked until stored; a disconnect mid-conversation loses nothing', async () => {
    await start(echo(0) + socket('native_stream = false\n'));
    // The first write to the inbox fails (a full disk, say): the envelope must stay un-acked.
    failNextInboxAdd(d!);
    const first = sl.push(sl.dmEvent('first message'));
    await waitFor(() => d!.logs.entries().some((l) => l.msg === 'Slack event not stored; not acked, Slack will send it again'));
    expect(sl.acks.has(first)).toBe(false);
    expect(sl.messages).toHaveLength(0);

    sl.disconnect();
    await waitFor(() => !sl.socketOpen, 5000);
    const during = sl.push(sl.dmEvent('sent while reconnecting'));
    await waitFor(() => sl.acks.has(first) && sl.acks.has(during), 20_000);
    await waitFor(() => sl.texts('D0DM0001').length === 2, 10_000);
    // Settled: every envelope is acked (stored, or recognised as a duplicate) and no turn runs
    // or waits, so nothing can answer again.
    await waitFor(() => sl.unacked === 0 && d!.daemon.status().turns.list.length === 0);
    expect(sl.texts('D0DM0001').sort()).toEqual(['first message', 'sent while reconnecting']);
    expect(sl.connections).toBe(2);
    expect(d!.daemon.status().channels[0]).toMatchObject({ state: 'connected' });
  });

  it('a malformed Socket Mode envelope (null body, "event": null) is acked and dropped with one debug line', async () => {
    await start(echo(0) + socket('native_stream = false\n'));
    const a = sl.pushPayload(null);
    const b = sl.pushPayload({ ...sl.callback(sl.dmEvent('x')), event: null });
    await waitFor(() => sl.acks.has(a) && sl.acks.has(b), 10_000);
    expect(d!.logs.lines.filter((l) => l.includes('malformed Slack envelope'))).toHaveLength(2);
    const ok = sl.push(sl.dmEvent('after the junk'));
    await waitFor(() => sl.acks.has(ok) && sl.texts('D0DM0001')[0] === 'after the junk', 10_000);
  });

  it('invalid_auth parks the channel as failed while the others keep answering', async () => {
    await start(`${echo(0)}${socket()}\n[[channels]]\nid = "web"\ntype = "webchat"\n`, { ...env(), SL_BOT: 'xoxb-wrong' });
    expect(d!.daemon.status().channels.find((c) => c.id === 'sl')).toMatchObject({
      state: 'failed',
      last_error: { code: 'CHANNEL_AUTH_FAILED', message: expect.stringContaining('invalid_auth') },
    });
    const c = new ChatClient(d!.url, 'tab');
    await c.opened;
    c.send('web still works');
    expect((await c.finals())[0]!.text).toBe('web still works');
    c.close();
  });

  describe('HTTP events mode', () => {
    const post = (body: string, headers: Record<string, string>) => fetch(`${d!.url}/webhooks/sl`, { method: 'POST', headers, body });

    it('refuses a bad signature and a stale timestamp with 401, storing nothing; answers url_verification', async () => {
      await start(echo(0) + http());
      const body = JSON.stringify(sl.callback(sl.dmEvent('forged')));
      expect((await post(body, signSlack(body, 'the-wrong-secret'))).status).toBe(401);
      expect((await post(body, signSlack(body, 'signing-secret-123', Math.floor(Date.now() / 1000) - 6 * 60))).status).toBe(401);
      expect((await post(body, { 'content-type': 'application/json' })).status).toBe(401);
      // A correctly signed event after them is stored and answered; it is the only one.
      const real = JSON.stringify(sl.callback(sl.dmEvent('the real one')));
      expect((await post(real, signSlack(real, 'signing-secret-123'))).status).toBe(200);
      await waitFor(() => sl.texts('D0DM0001')[0] === 'the real one');
      expect(sl.messages).toHaveLength(1);
      expect((await d!.daemon.metrics.received.get()).values.map((v) => v.value)).toEqual([1]);
      const challenge = JSON.stringify({ type: 'url_verification', token: 't', challenge: 'c-123' });
      const res = await post(challenge, signSlack(challenge, 'signing-secret-123'));
      expect(await res.json()).toEqual({ challenge: 'c-123' });
    });

    it('refuses a timestamp more than 5 minutes in the future too', async () => {
      await start(echo(0) + http());
      const body = JSON.stringify(sl.callback(sl.dmEvent('from the future')));
      expect((await post(body, signSlack(body, 'signing-secret-123', Math.floor(Date.now() / 1000) + 6 * 60))).status).toBe(401);
      expect((await post(body, signSlack(body, 'signing-secret-123', Math.floor(Date.now() / 1000) + 60))).status).toBe(200);
      await waitFor(() => sl.texts('D0DM0001')[0] === 'from the future', 5000);
    });

    it('a signed but malformed request (null, "event": null) gets 200 and is dropped with one debug line', async () => {
      await start(echo(0) + http());
      for (const body of [
        'null',
        JSON.stringify({ ...sl.callback(sl.dmEvent('x')), event: null }),
        JSON.stringify(sl.callback({ type: 'message', user: 'U0USER1' })),
      ]) {
        const res = await post(body, signSlack(body, 'signing-secret-123'));
        expect(res.status, body).toBe(200);
      }
      expect(d!.logs.lines.filter((l) => l.includes('malformed Slack request'))).toHaveLength(2);
      expect(d!.logs.text).not.toMatch(/HTTP handler failed|not stored/);
      expect((await d!.daemon.metrics.received.get()).values).toHaveLength(0);
    });

    it('acks while the model is still writing, and a retried event is answered once', async () => {
      const llm = await withLlm();
      // The model holds its answer until the test lets it go: the 200s below can only come
      // from a handler that does not wait for the turn (Slack wants them within 3 s).
      let releaseModel!: () => void;
      const model = new Promise<void>((r) => (releaseModel = r));
      llm.script({ kind: 'stream', chunks: [{ content: 'slow ', after: model }, { content: 'answer' }] });
      await start(llmAgent(llm.url) + http('native_stream = false\n'));
      const body = JSON.stringify(sl.callback(sl.mentionEvent('take your time')));
      const res = await post(body, signSlack(body, 'signing-secret-123'));
      expect(res.status).toBe(200);
      // Slack did not see the 200 in time and retries the same event.
      const retry = await post(body, { ...signSlack(body, 'signing-secret-123'), 'x-slack-retry-num': '1', 'x-slack-retry-reason': 'http_timeout' });
      expect(retry.status).toBe(200);
      expect(sl.messages).toHaveLength(0);
      releaseModel();
      await waitFor(() => sl.texts('C0CHAN001')[0] === 'slow answer', 15_000);
      expect(sl.callsOf('chat.postMessage').filter((c) => c.args.text)).toHaveLength(1);
      expect(llm.requests).toHaveLength(1);
      expect((await d!.daemon.metrics.duplicates.get()).values[0]!.value).toBe(1);
    });
  });
});
