import pino from 'pino';
import { beforeEach, describe, expect, it } from 'vitest';
import { IrcAdapter } from '../../../channels/irc/adapter.js';
import { TokenBucket } from '../../../channels/irc/bucket.js';
import { DropNotices } from '../../../channels/irc/drop-notice.js';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import { NOT_KEPT_REPLY } from '../../../src/contracts/topology.js';
import { waitFor } from '../../helpers/daemon.js';
import { type IrcUser, ngircdMissing, ngircdPerSuite, OPER } from '../../helpers/irc.js';

/** The listener's bound on messages waiting to be stored (MAX_PENDING_DELIVERIES in channels/irc/adapter.ts). */
const PENDING_BOUND = 1000;
const NICK = 'bkbot';
const ROOM = '#backlog';

interface LogLine {
  msg: string;
  from?: string;
  notice?: string;
}

/**
 * While the store does not take messages (the deliver call never settles, as with a stalled
 * store), the IRC listener keeps at most PENDING_BOUND waiting and drops the rest. IRC never
 * delivers a message again, so whoever asked the bot must be told theirs was not kept.
 */
describe.skipIf(ngircdMissing !== undefined)(`IRC: messages dropped behind a stalled store${ngircdMissing ? ` (skipped: ${ngircdMissing})` : ''}`, () => {
  const t = ngircdPerSuite();
  let logs: LogLine[];
  beforeEach(() => {
    logs = [];
  });

  const user = (nick: string) => t.user(nick, ROOM);
  const notices = (u: IrcUser) =>
    u.lines.filter((l) => l.startsWith(`:${NICK}!`) && l.includes(` NOTICE ${u.nick} :`)).map((l) => l.slice(l.indexOf(' :') + 2));
  /** A round trip to the server: every line the server queued for `u` before it answers is in. */
  const synced = async (u: IrcUser, token: string) => {
    u.send(`PING :${token}`);
    await waitFor(() => u.lines.some((l) => / PONG /.test(l) && l.endsWith(token)), 10_000);
  };
  const dropped = (from: string) => logs.filter((l) => l.msg === 'IRC message dropped: too many waiting to be stored' && l.from === from);
  /** A user who may flood: an IRC operator's mode +F lifts ngIRCd's flood throttling (3 lines a second). */
  const flooder = async (nick: string) => {
    const u = await user(nick);
    u.send(`OPER ${OPER.name} ${OPER.password}`);
    await waitFor(() => u.lines.some((l) => new RegExp(` 381 ${nick} `).test(l)), 10_000);
    u.send(`MODE ${nick} +F`);
    await waitFor(() => u.lines.some((l) => new RegExp(`MODE ${nick} :?\\+F`).test(l)), 10_000);
    return u;
  };
  /** The bot listening in ROOM (as `watcher` sees) with the store stalled: no delivery settles until the test ends. */
  const listenStalled = async (allowFrom: string[], watcher: IrcUser) => {
    const log = pino({ level: 'info' }, { write: (s: string) => void logs.push(JSON.parse(s)) });
    const adapter = new IrcAdapter({
      id: 'irc',
      host: '127.0.0.1',
      port: t.irc.port,
      tls: false,
      nick: NICK,
      password: t.irc.password,
      channels: [ROOM],
      allowFrom,
      floodBurst: 2,
      floodIntervalMs: 100,
      connectTimeoutMs: 5000,
      log,
    });
    const delivered: ChannelMessage[] = [];
    const stalled = (msg: ChannelMessage) => {
      delivered.push(msg);
      return new Promise<boolean>((_, reject) => t.stop.signal.addEventListener('abort', () => reject(t.stop.signal.reason), { once: true }));
    };
    let connected = false;
    const listening = adapter.listen(stalled, t.stop.signal, () => (connected = true)).catch(() => {});
    await waitFor(() => connected, 10_000);
    await waitFor(() => watcher.lines.some((l) => l.startsWith(`:${NICK}!`) && / JOIN :?#backlog/i.test(l)), 10_000);
    return { delivered, listening };
  };
  /** Fills the bound: one delivery stalled, the rest waiting behind it. Lines from one client reach the bot in order. */
  const fillBound = (u: IrcUser) => {
    for (let i = 0; i < PENDING_BOUND; i++) u.say(NICK, `question ${i}`);
  };

  it('an addressed message past the bound gets one NOTICE per sender saying it was not kept; chatter gets none', async () => {
    const alice = await flooder('alice');
    const bob = await user('bob');
    const { delivered, listening } = await listenStalled(['*'], bob);

    // The next line from alice is past the bound.
    fillBound(alice);
    alice.say(NICK, 'one question too many');
    await waitFor(() => notices(alice).length > 0, 20_000);
    expect(notices(alice)).toEqual([NOT_KEPT_REPLY]);
    expect(delivered.map((m) => m.text)).toEqual(['question 0']);
    expect(dropped('alice').map((l) => l.notice)).toEqual(['telling the sender']);

    // Once a minute per sender, however many of theirs are dropped.
    alice.say(NICK, 'and another');
    await waitFor(() => dropped('alice').length === 2, 10_000);
    expect(dropped('alice')[1]!.notice).toBe('sender told within the last minute');

    // Chatter in the channel is dropped without a word; a mention there is answered to its sender.
    bob.say(ROOM, 'just chatting');
    await waitFor(() => dropped('bob').length === 1, 10_000);
    expect(dropped('bob')[0]!.notice).toBe('not addressed to the bot');
    bob.say(ROOM, `${NICK}: are you there?`);
    await waitFor(() => notices(bob).length > 0, 10_000);

    // The bot wrote every notice before bob's: after a round trip each user has all theirs.
    await synced(alice, 'sync-a');
    await synced(bob, 'sync-b');
    expect(notices(alice)).toEqual([NOT_KEPT_REPLY]);
    expect(notices(bob)).toEqual([NOT_KEPT_REPLY]);
    // Nothing was said in the channel itself.
    expect(bob.privmsgs.filter((p) => p.from === NICK)).toEqual([]);
    t.stop.abort(new Error('test over'));
    await listening;
  });

  it('a sender allow_from does not let in gets no NOTICE for a dropped message; one it lets in still does', async () => {
    const alice = await flooder('alice');
    const mallory = await user('mallory');
    const { listening } = await listenStalled(['alice!*@*'], mallory);
    fillBound(alice);
    // Chatter (no notice either way) marks the bound full before mallory, on another connection, speaks.
    alice.say(ROOM, 'just chatting');
    await waitFor(() => dropped('alice').length === 1, 20_000);
    // The stranger asks in private and in the channel, both past the bound: the core would refuse them anyway.
    mallory.say(NICK, 'let me in');
    mallory.say(ROOM, `${NICK}: hello?`);
    await waitFor(() => dropped('mallory').length === 2, 20_000);
    expect(dropped('mallory').map((l) => l.notice)).toEqual(['sender not on allow_from', 'sender not on allow_from']);

    // Alice, let in by her mask, is told; the bot would have written any notice to mallory before hers.
    alice.say(NICK, 'one question too many');
    await waitFor(() => notices(alice).length > 0, 20_000);
    expect(dropped('alice').map((l) => l.notice)).toEqual(['not addressed to the bot', 'telling the sender']);
    await synced(mallory, 'sync-m');
    expect(notices(mallory)).toEqual([]);
    expect(notices(alice)).toEqual([NOT_KEPT_REPLY]);
    t.stop.abort(new Error('test over'));
    await listening;
  });
});

describe('IRC: "not kept" notices are bounded', () => {
  it('they take the send bucket like every line, and few wait for it: a flood of senders cannot make the bot flood', async () => {
    const logs: LogLine[] = [];
    const log = pino({ level: 'info' }, { write: (s: string) => void logs.push(JSON.parse(s)) });
    // One line now, the next only in a minute.
    const bucket = new TokenBucket(1, 60_000);
    const notices = new DropNotices(bucket, log, 'irc');
    const stop = new AbortController();
    const written: string[] = [];
    const write = (line: string) => (written.push(line), true);
    const outcomes = Array.from({ length: 8 }, (_, i) => notices.tell(`nick${i}`, stop.signal, write));
    expect(outcomes).toEqual([...Array(5).fill('telling the sender'), ...Array(3).fill('too many notices already')]);
    expect(notices.tell('NICK0', stop.signal, write)).toBe('sender told within the last minute');
    await waitFor(() => written.length === 1);
    expect(written).toEqual([`NOTICE nick0 :${NOT_KEPT_REPLY}`]);
    // Listening ends: the notices still waiting for the bucket are not sent, and the log says why.
    stop.abort(new Error('listener stopped'));
    await waitFor(() => logs.filter((l) => l.msg === 'IRC "not kept" notice not sent').length === 4);
    expect(written).toHaveLength(1);
  });
});
