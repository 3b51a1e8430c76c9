import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { xml } from '@xmpp/client';
import { STOP_MARKER } from '../../src/stream/reply-stream.js';
import { say, withCountingFile } from '../helpers/approval.js';
import { type TestDaemon, waitFor } from '../helpers/daemon.js';
import { withChannelDaemon, withLlm, withTempDir } from '../helpers/fixtures.js';
import { firstMcpConnected } from '../helpers/mcp.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { echoAgent as echo, llmAgent } from '../helpers/toml.js';
import { type Prosody, prosodyMissing, startProsody, XmppUser } from '../helpers/xmpp.js';

const words = (n: number, w = 'word') => Array.from({ length: n }, (_, i) => `${w}${i}`).join(' ');
const PASSWORD = 'pw-test-1';

/** One Prosody for the file; each test uses accounts and rooms of its own. */
describe.skipIf(prosodyMissing !== undefined)(`XMPP channel against a real Prosody${prosodyMissing ? ` (skipped: ${prosodyMissing})` : ''}`, () => {
  let server: Prosody;
  beforeAll(async () => {
    server = await startProsody();
  });
  afterAll(async () => {
    await server?.stop();
  });

  const channel = (local: string, extra = '') => {
    server.register(local, PASSWORD);
    return `[[channels]]\nid = "xmpp"\ntype = "xmpp"\njid = "${local}@localhost"\nserver = "127.0.0.1:${server.port}"\npassword_env = "XMPP_PASS"\nconnect_timeout_ms = 10000\n${extra}\n`;
  };
  const env = { XMPP_PASS: PASSWORD };
  const user = async (local: string, corrections = false) => {
    server.register(local, PASSWORD);
    const u = new XmppUser(local, server, PASSWORD, corrections);
    onTestFinished(() => u.close());
    return u.start();
  };
  const connected = (d: TestDaemon) => waitFor(() => d.daemon.status().channels[0]!.state === 'connected', 15_000);
  const settled = (d: TestDaemon) => waitFor(() => d.daemon.status().turns.in_flight === 0 && d.daemon.status().turns.list.length === 0, 10_000);

  it('a one-to-one chat is answered once, with the final text only where the client has no corrections', async () => {
    const alice = await user('alice');
    const d = await withChannelDaemon(echo(30) + channel('bot1', 'allow_from = ["alice@localhost"]'), env);
    await connected(d);
    alice.say('bot1@localhost', words(12));
    await waitFor(() => alice.from('bot1@localhost').length >= 1, 10_000);
    await settled(d);
    expect(alice.from('bot1@localhost').map((r) => r.body)).toEqual([words(12)]);
    expect(alice.from('bot1@localhost')[0]!.replaces).toBeUndefined();
  });

  it('where the client announces XEP-0308, the answer is drafted as one message corrected in place', async () => {
    const bea = await user('bea', true);
    const d = await withChannelDaemon(echo(120) + channel('bot2', 'allow_from = ["*"]'), env);
    await connected(d);
    bea.say('bot2@localhost', words(20));
    await waitFor(() => bea.shown('bot2@localhost')[0] === words(20), 15_000);
    await settled(d);
    const got = bea.from('bot2@localhost');
    expect(got.filter((r) => !r.replaces)).toHaveLength(1);
    expect(got.filter((r) => r.replaces).length).toBeGreaterThanOrEqual(1);
    expect(got.filter((r) => r.replaces).every((r) => r.replaces === got[0]!.id)).toBe(true);
    expect(bea.shown('bot2@localhost')).toEqual([words(20)]);
  });

  it('in a room: chatter is ignored, a mention is answered once in the room; a stranger is refused', async () => {
    const carl = await user('carl');
    const room = `r1@${server.muc}`;
    await carl.join(room, 'carl');
    const d = await withChannelDaemon(echo(0) + channel('bot3', `rooms = ["${room}/helper"]\nallow_from = ["carl@localhost"]`), env);
    await connected(d);
    await waitFor(() => carl.stanzas.some((s) => s.is('presence') && s.attrs.from === `${room}/helper`), 10_000);
    carl.say(room, 'just chatting', 'groupchat');
    carl.say(room, 'helper: what is up', 'groupchat');
    await waitFor(() => carl.from(room).some((r) => r.from === `${room}/helper` && r.body === 'what is up'), 10_000);
    await waitFor(() => d.logs.entries().some((l) => l.msg === 'message received' && l.verdict === 'unaddressed'));
    const dora = await user('dora');
    dora.say('bot3@localhost', 'hi');
    await waitFor(() => dora.from('bot3@localhost').some((r) => r.body.includes('not allowed')), 10_000);
    await settled(d);
    expect(
      carl
        .from(room)
        .filter((r) => r.from === `${room}/helper`)
        .map((r) => r.body),
    ).toEqual(['what is up']);
  });

  it("a room nick that is taken gets '_' added, and the bot answers under it", async () => {
    const kim = await user('kim');
    const room = `r3@${server.muc}`;
    await kim.join(room, 'helper');
    const d = await withChannelDaemon(echo(0) + channel('bot11', `rooms = ["${room}/helper"]\nallow_from = ["*"]`), env);
    await connected(d);
    await waitFor(() => kim.stanzas.some((s) => s.is('presence') && s.attrs.from === `${room}/helper_`), 10_000);
    kim.say(room, 'helper_: are you there', 'groupchat');
    await waitFor(() => kim.from(room).some((r) => r.from === `${room}/helper_` && r.body === 'are you there'), 10_000);
  });

  it('a long answer is split into messages at the limit', async () => {
    const llm = await withLlm();
    const para = `${words(300, 'lorem')}\n\n`;
    const answer = para.repeat(9);
    expect(answer.length).toBeGreaterThan(16_000);
    llm.script({ kind: 'stream', chunks: answer.match(/[\s\S]{1,2000}/g)!.map((content) => ({ content })) });
    const eve = await user('eve');
    const d = await withChannelDaemon(llmAgent(llm.url) + channel('bot4', 'allow_from = ["*"]'), env);
    await connected(d);
    eve.say('bot4@localhost', 'write a lot');
    const wordsOf = (t: string) => t.split(/\s+/).filter(Boolean);
    await waitFor(() => wordsOf(eve.shown('bot4@localhost').join(' ')).join(' ') === wordsOf(answer).join(' '), 20_000);
    await settled(d);
    const shown = eve.shown('bot4@localhost');
    expect(shown).toHaveLength(2);
    // Split between paragraphs, each message within the limit.
    for (const m of shown) {
      expect(m.length).toBeLessThanOrEqual(16_000);
      expect(m.trim().startsWith('lorem0 ')).toBe(true);
      expect(m.trim().endsWith('lorem299')).toBe(true);
    }
  });

  it('an approval is asked as text and decided by /approve ID (XMPP has no buttons)', async () => {
    const llm = await withLlm();
    const file = withCountingFile();
    const ida = await user('ida');
    const d = await withChannelDaemon(llmAgent(llm.url) + file.server() + channel('bot9', 'allow_from = ["*"]'), env);
    await firstMcpConnected(d);
    await connected(d);
    llm.script(file.edit(), say('Edited on XMPP.'));
    ida.say('bot9@localhost', 'edit the count');
    const ask = await waitFor(() => ida.from('bot9@localhost').find((r) => /\/approve \S+/.test(r.body)), 20_000);
    expect(ask.body).toContain('fs__edit_file');
    ida.say('bot9@localhost', `/approve ${/\/approve (\S+)/.exec(ask.body)![1]}`);
    await waitFor(() => ida.from('bot9@localhost').some((r) => r.body === 'Edited on XMPP.'), 20_000);
    expect(file.runs).toBe(1);
  });

  it('/stop mid-answer: one message with the answer so far and the stop marker', async () => {
    const fay = await user('fay');
    const d = await withChannelDaemon(echo(150) + channel('bot5', 'allow_from = ["*"]'), env);
    await connected(d);
    fay.say('bot5@localhost', words(40));
    await waitFor(() => d.daemon.status().turns.in_flight === 1, 10_000);
    fay.say('bot5@localhost', '/stop');
    await waitFor(() => fay.from('bot5@localhost').some((r) => r.body.endsWith(STOP_MARKER)), 10_000);
    await settled(d);
    expect(fay.from('bot5@localhost')).toHaveLength(1);
  });

  it('a wrong password parks the channel as failed with CHANNEL_AUTH_FAILED', async () => {
    const d = await withChannelDaemon(echo(0) + channel('bot6', 'allow_from = ["*"]'), { XMPP_PASS: 'wrong' });
    await waitFor(() => d.daemon.status().channels[0]!.state === 'failed', 15_000);
    expect(d.daemon.status().channels[0]!.last_error).toMatchObject({ code: 'CHANNEL_AUTH_FAILED', message: expect.stringContaining('password') });
  });

  it('a kick from a room parks the channel with CHANNEL_KICKED', async () => {
    const owner = await user('gus');
    const room = `r2@${server.muc}`;
    await owner.join(room, 'gus');
    const d = await withChannelDaemon(echo(0) + channel('bot7', `rooms = ["${room}/kickme"]\nallow_from = ["*"]`), env);
    await connected(d);
    await waitFor(() => owner.stanzas.some((s) => s.is('presence') && s.attrs.from === `${room}/kickme`), 10_000);
    await owner.x.send(
      xml(
        'iq',
        { type: 'set', to: room, id: 'kick1' },
        xml('query', { xmlns: 'http://jabber.org/protocol/muc#admin' }, xml('item', { nick: 'kickme', role: 'none' }, xml('reason', {}, 'go away'))),
      ),
    );
    await waitFor(() => d.daemon.status().channels[0]!.state === 'failed', 10_000);
    expect(d.daemon.status().channels[0]!.last_error).toMatchObject({ code: 'CHANNEL_KICKED', message: expect.stringContaining('go away') });
  });

  it('kill -9 mid-answer, start again: one answer', async () => {
    const llm = await withLlm();
    const hal = await user('hal');
    const file = writeProcessConfig(withTempDir('xmppproc'), llmAgent(llm.url) + channel('bot8', 'allow_from = ["*"]'));
    const text = words(30, 'w');
    const chunks = text.split(/(?<= )/);
    // The first process's model writes all but the last word and stalls: the turn is mid-answer when the kill lands.
    llm.script({ kind: 'stall', chunks: chunks.slice(0, -1).map((content) => ({ content })) });
    const p1 = withDaemonProcess(file, env);
    const status = async (url: string) => (await (await fetch(`${url}/status`)).json()) as { channels: Array<{ state: string }>; turns: { list: unknown[] } };
    const url1 = await p1.url();
    await waitFor(async () => (await status(url1)).channels[0]!.state === 'connected', 15_000);
    hal.say('bot8@localhost', text);
    await waitFor(() => llm.requests.length === 1, 15_000);
    p1.signal('SIGKILL');
    await p1.exited;

    const p2 = withDaemonProcess(file, env);
    await waitFor(() => hal.from('bot8@localhost').length >= 1, 20_000);
    const url = await p2.url();
    await waitFor(async () => (await status(url)).turns.list.length === 0, 10_000);
    expect(hal.from('bot8@localhost').map((r) => r.body)).toEqual([text]);
    expect(p2.lines.some((l) => l.msg === 'recovered unfinished messages from the inbox')).toBe(true);
    p2.signal('SIGTERM');
    expect(await p2.exited).toBe(0);
  });

  it('kill -9 mid-draft (a client with corrections), start again: the restarted turn corrects the same message', async () => {
    const llm = await withLlm();
    const joe = await user('joe', true);
    const file = writeProcessConfig(withTempDir('xmppproc'), llmAgent(llm.url) + channel('bot10', 'allow_from = ["*"]'));
    const text = words(30, 'v');
    const chunks = text.split(/(?<= )/);
    llm.script({ kind: 'stall', chunks: chunks.slice(0, -1).map((content) => ({ content, delayMs: 100 })) });
    const p1 = withDaemonProcess(file, env);
    const status = async (url: string) => (await (await fetch(`${url}/status`)).json()) as { channels: Array<{ state: string }>; turns: { list: unknown[] } };
    const url1 = await p1.url();
    await waitFor(async () => (await status(url1)).channels[0]!.state === 'connected', 15_000);
    joe.say('bot10@localhost', text);
    // A correction means the draft's id was committed before it (as Telegram's edit does).
    await waitFor(() => joe.from('bot10@localhost').some((r) => r.replaces), 15_000);
    p1.signal('SIGKILL');
    await p1.exited;
    expect(joe.shown('bot10@localhost')[0]).not.toBe(text);

    const p2 = withDaemonProcess(file, env);
    await waitFor(() => joe.shown('bot10@localhost')[0] === text, 20_000);
    const url = await p2.url();
    await waitFor(async () => (await status(url)).turns.list.length === 0, 10_000);
    expect(joe.shown('bot10@localhost')).toEqual([text]);
    expect(joe.from('bot10@localhost').filter((r) => !r.replaces)).toHaveLength(1);
    p2.signal('SIGTERM');
    expect(await p2.exited).toBe(0);
  });
});
