import Database from 'better-sqlite3';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { STOP_MARKER } from '../../src/stream/reply-stream.js';
import { say, withCountingFile } from '../helpers/approval.js';
import { type TestDaemon, waitFor } from '../helpers/daemon.js';
import { withChannelDaemon, withLlm, withTempDir } from '../helpers/fixtures.js';
import { IrcUser, type Ngircd, ngircdMissing, OPER, startNgircd } from '../helpers/irc.js';
import { firstMcpConnected } from '../helpers/mcp.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { echoAgent as echo, llmAgent } from '../helpers/toml.js';

const words = (n: number, w = 'word') => Array.from({ length: n }, (_, i) => `${w}${i}`).join(' ');

/** One ngIRCd for the file; each test uses nicks and channels of its own. */
describe.skipIf(ngircdMissing !== undefined)(`IRC channel against a real ngIRCd${ngircdMissing ? ` (skipped: ${ngircdMissing})` : ''}`, () => {
  let irc: Ngircd;
  beforeAll(async () => {
    irc = await startNgircd();
  });
  afterAll(async () => {
    await irc?.stop();
  });

  const channel = (nick: string, extra = '') =>
    `[[channels]]\nid = "irc"\ntype = "irc"\nserver = "127.0.0.1:${irc.port}"\ntls = false\nnick = "${nick}"\npassword_env = "IRC_PASS"\nconnect_timeout_ms = 5000\nflood_burst = 5\nflood_interval_ms = 100\n${extra}\n`;
  const env = () => ({ IRC_PASS: irc.password });
  const user = async (nick: string) => {
    const u = new IrcUser(nick, irc.port, irc.password);
    onTestFinished(() => u.close());
    return u.connect();
  };
  const connected = (d: TestDaemon) => waitFor(() => d.daemon.status().channels[0]!.state === 'connected', 10_000);
  const settled = (d: TestDaemon) => waitFor(() => d.daemon.status().turns.in_flight === 0 && d.daemon.status().turns.list.length === 0, 10_000);

  it('a private message is answered once; a mention in a channel is answered once there, chatter is not', async () => {
    const alice = await user('alice');
    await alice.join('#room');
    const d = await withChannelDaemon(echo(0) + channel('dmbot', 'channels = ["#room"]\nallow_from = ["*"]'), env());
    await connected(d);
    await waitFor(() => alice.lines.some((l) => /^:dmbot!\S+ JOIN :?#room/i.test(l)), 10_000);
    alice.say('dmbot', 'hello there');
    await waitFor(() => alice.texts('dmbot').includes('hello there'), 10_000);
    alice.say('#room', 'just chatting about dmbot-free things');
    alice.say('#room', 'dmbot: what is up');
    await waitFor(() => alice.texts('dmbot', '#room').includes('what is up'), 10_000);
    await waitFor(() => d.logs.entries().some((l) => l.msg === 'message received' && l.verdict === 'unaddressed'));
    await settled(d);
    expect(alice.texts('dmbot')).toEqual(['hello there']);
    expect(alice.texts('dmbot', '#room')).toEqual(['what is up']);
  });

  it('allow_from takes nick!user@host masks: others are told their id once and not answered', async () => {
    const carol = await user('carol');
    const mallory = await user('mallory');
    const d = await withChannelDaemon(echo(0) + channel('maskbot', 'allow_from = ["carol!*@127.0.0.1"]'), env());
    await connected(d);
    carol.say('maskbot', 'let me in');
    await waitFor(() => carol.texts('maskbot').includes('let me in'), 10_000);
    mallory.say('maskbot', 'me too');
    await waitFor(() => mallory.texts('maskbot').some((t) => t.includes('not allowed')), 10_000);
    expect(mallory.texts('maskbot')[0]).toContain('mallory!~mallory@127.0.0.1');
    await settled(d);
    expect(mallory.texts('maskbot')).toHaveLength(1);
  });

  it('a long Markdown answer: plain lines within 512 bytes as relayed, split at word boundaries, code verbatim', async () => {
    const llm = await withLlm();
    const prose = `${words(150, 'wört')} **bold** and _it_ and \`x*y*z\` and [a link](https://example.com/a_b)`;
    const code = ['def f(**kwargs):', '    return a * b * c  # __init__', `    s = "${'z'.repeat(600)}"`];
    const answer = `# Title\n\n${prose}\n\n\`\`\`python\n${code.join('\n')}\n\`\`\`\n\nThat is all.`;
    llm.script({ kind: 'stream', chunks: answer.match(/[\s\S]{1,300}/g)!.map((content) => ({ content })) });
    const bob = await user('bob');
    const d = await withChannelDaemon(llmAgent(llm.url) + channel('longbot', 'allow_from = ["*"]'), env());
    await connected(d);
    bob.say('longbot', 'write a lot');
    await waitFor(() => bob.texts('longbot').includes('That is all.'), 20_000);
    await settled(d);
    const got = bob.privmsgs.filter((p) => p.from === 'longbot');
    for (const p of got) expect(Buffer.byteLength(`${p.raw}\r\n`)).toBeLessThanOrEqual(512);
    const texts = got.map((p) => p.text);
    expect(texts[0]).toBe('Title');
    // The paragraph is several lines that join back, by spaces, into the words, without the markup.
    const end = texts.findIndex((t) => t.endsWith('(https://example.com/a_b)'));
    expect(end).toBeGreaterThan(1);
    expect(texts.slice(1, end + 1).join(' ')).toBe(`${words(150, 'wört')} bold and it and x*y*z and a link (https://example.com/a_b)`);
    // Code keeps its lines (the fence goes); the overlong one is cut, not lost.
    expect(texts.slice(end + 1, end + 3)).toEqual(code.slice(0, 2));
    expect(texts.slice(end + 3, -1).join('')).toBe(code[2]);
    expect(texts.at(-1)).toBe('That is all.');
  });

  it('/stop mid-answer: the answer so far and the stop marker, once', async () => {
    const dave = await user('dave');
    const d = await withChannelDaemon(echo(150) + channel('stopbot', 'allow_from = ["*"]'), env());
    await connected(d);
    dave.say('stopbot', words(40));
    await waitFor(() => d.daemon.status().turns.in_flight === 1, 10_000);
    dave.say('stopbot', '/stop');
    await waitFor(() => dave.texts('stopbot').some((t) => t.endsWith(STOP_MARKER)), 10_000);
    await settled(d);
    const texts = dave.texts('stopbot');
    expect(texts.filter((t) => t.endsWith(STOP_MARKER))).toHaveLength(1);
    expect(texts.join(' ')).not.toContain(words(40));
  });

  it('an approval is asked as text and decided by /approve ID (IRC has no buttons)', async () => {
    const llm = await withLlm();
    const file = withCountingFile();
    const fred = await user('fred');
    const d = await withChannelDaemon(llmAgent(llm.url) + file.server() + channel('okbot', 'allow_from = ["*"]'), env());
    await firstMcpConnected(d);
    await connected(d);
    llm.script(file.edit(), say('Edited on IRC.'));
    fred.say('okbot', 'edit the count');
    const ask = await waitFor(() => fred.texts('okbot').find((t) => /\/approve \S+/.test(t)), 20_000);
    expect(fred.texts('okbot').join('\n')).toContain('fs__edit_file');
    fred.say('okbot', `/approve ${/\/approve (\S+)/.exec(ask)![1]}`);
    await waitFor(() => fred.texts('okbot').includes('Edited on IRC.'), 20_000);
    expect(file.runs).toBe(1);
  });

  it('nick in use: the bot takes an alternate and answers under it', async () => {
    const squatter = await user('nickbot');
    const d = await withChannelDaemon(echo(0) + channel('nickbot', 'allow_from = ["*"]'), env());
    await connected(d);
    squatter.say('nickbot_', 'who are you');
    await waitFor(() => squatter.texts('nickbot_').includes('who are you'), 10_000);
  });

  it('a dropped connection (an operator KILL) is reconnected with backoff and the bot answers again', async () => {
    const oper = await user('oper');
    oper.send(`OPER ${OPER.name} ${OPER.password}`);
    await waitFor(() => oper.lines.some((l) => / 381 oper /.test(l)), 10_000);
    const d = await withChannelDaemon(echo(0) + channel('recobot', 'allow_from = ["*"]\nbackoff = { initial_ms = 200 }'), env());
    await connected(d);
    oper.send('KILL recobot :testing the reconnect');
    // The supervisor's log, not a poll of the state: a short backoff can pass between two polls.
    const states = () =>
      d.logs
        .entries()
        .filter((l) => l.channel === 'irc' && typeof l.state === 'string')
        .map((l) => l.state);
    await waitFor(() => states().includes('backoff') && states().lastIndexOf('connected') > states().indexOf('backoff'), 15_000);
    expect(d.daemon.status().channels[0]!.last_error).toMatchObject({ code: 'CHANNEL_NETWORK', message: expect.stringContaining('testing the reconnect') });
    oper.say('recobot', 'still there?');
    await waitFor(() => oper.texts('recobot').includes('still there?'), 10_000);
  });

  it('a wrong password parks the channel as failed with CHANNEL_AUTH_FAILED', async () => {
    const d = await withChannelDaemon(echo(0) + channel('authbot', 'allow_from = ["*"]'), { IRC_PASS: 'wrong' });
    await waitFor(() => d.daemon.status().channels[0]!.state === 'failed', 10_000);
    expect(d.daemon.status().channels[0]!.last_error).toMatchObject({ code: 'CHANNEL_AUTH_FAILED', message: expect.stringContaining('password') });
  });

  it('a KICK parks the channel with CHANNEL_KICKED; a ban on joining with CHANNEL_BANNED', async () => {
    const op = await user('op');
    await op.join('#kick');
    const d = await withChannelDaemon(echo(0) + channel('kickbot', 'channels = ["#kick"]\nallow_from = ["*"]'), env());
    await connected(d);
    await waitFor(() => op.lines.some((l) => /^:kickbot!\S+ JOIN :?#kick/i.test(l)), 10_000);
    op.send('KICK #kick kickbot :go away');
    await waitFor(() => d.daemon.status().channels[0]!.state === 'failed', 10_000);
    expect(d.daemon.status().channels[0]!.last_error).toMatchObject({ code: 'CHANNEL_KICKED', message: expect.stringContaining('go away') });
    await d.stop();

    await op.join('#ban');
    op.send('MODE #ban +b banbot!*@*');
    await waitFor(() => op.lines.some((l) => / MODE #ban \+b banbot!\*@\*/.test(l)), 10_000);
    const d2 = await withChannelDaemon(echo(0) + channel('banbot', 'channels = ["#ban"]\nallow_from = ["*"]'), env());
    await waitFor(() => d2.daemon.status().channels[0]!.state === 'failed', 10_000);
    expect(d2.daemon.status().channels[0]!.last_error).toMatchObject({ code: 'CHANNEL_BANNED', message: expect.stringContaining('#ban') });
  });

  it('kill -9 mid-answer, start again: every line once (the lines sent before the kill are not sent again)', async () => {
    const llm = await withLlm();
    const erin = await user('erin');
    const dir = withTempDir('ircproc');
    const file = writeProcessConfig(dir, llmAgent(llm.url) + channel('killbot', 'allow_from = ["*"]'));
    // 459 bytes: longer than one line of the bot's (planned at 380 bytes for this nick), within the user's: the answer is two lines.
    const text = Array.from({ length: 92 }, (_, i) => `w${100 + i}`).join(' ');
    const chunks = text.split(/(?<= )/);
    // The first process's model writes all but the last word and stalls: the first line is
    // complete (and sent), the second never is. The restarted one gets the whole echo.
    llm.script({ kind: 'stall', chunks: chunks.slice(0, -1).map((content) => ({ content })) });
    const p1 = withDaemonProcess(file, env());
    const status = async (url: string) => (await (await fetch(`${url}/status`)).json()) as { channels: Array<{ state: string }>; turns: { list: unknown[] } };
    const url1 = await p1.url();
    await waitFor(async () => (await status(url1)).channels[0]!.state === 'connected', 15_000);
    erin.say('killbot', text);
    await waitFor(() => erin.texts('killbot').length === 1, 15_000);
    // The first line's ref is committed (so the restarted turn knows it was sent).
    const db = () => new Database(join(dir, 'state', 'channeld.db'), { readonly: true, fileMustExist: true });
    await waitFor(() => {
      const c = db();
      try {
        return (c.prepare(`SELECT reply_refs FROM inbox`).all() as Array<{ reply_refs: string }>).some((r) => r.reply_refs !== '[]');
      } finally {
        c.close();
      }
    }, 10_000);
    p1.signal('SIGKILL');
    await p1.exited;
    expect(erin.texts('killbot')).toHaveLength(1);

    const p2 = withDaemonProcess(file, env());
    await waitFor(() => erin.texts('killbot').length >= 2, 20_000);
    const url = await p2.url();
    await waitFor(async () => (await status(url)).turns.list.length === 0, 10_000);
    expect(erin.texts('killbot').join(' ')).toBe(text);
    expect(erin.texts('killbot')).toHaveLength(2);
    expect(p2.lines.some((l) => l.msg === 'recovered unfinished messages from the inbox')).toBe(true);
    p2.signal('SIGTERM');
    expect(await p2.exited).toBe(0);
  });
});
