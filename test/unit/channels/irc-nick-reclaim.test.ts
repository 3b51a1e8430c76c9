import pino from 'pino';
import { beforeEach, describe, expect, it } from 'vitest';
import { IrcAdapter } from '../../../channels/irc/adapter.js';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import { waitFor } from '../../helpers/daemon.js';
import { type IrcUser, ngircdMissing, ngircdPerSuite } from '../../helpers/irc.js';

const ROOM = '#reclaim';
/** Each test its own configured nick: the bot of the test before may still hold its nick while the server reads its QUIT. */
const alternate = (nick: string) => `${nick}_`;

/**
 * The configured nick is held when the bot connects (after a reconnect, by its own ghost, until
 * the server times that out): the bot takes an alternate, and must take the configured nick back
 * once it is free, or every "channeld: ..." in a channel goes unanswered until a restart.
 */
describe.skipIf(ngircdMissing !== undefined)(`IRC: the configured nick taken back${ngircdMissing ? ` (skipped: ${ngircdMissing})` : ''}`, () => {
  const t = ngircdPerSuite();
  let logs: string[];
  beforeEach(() => {
    logs = [];
  });
  // Test users get nicks of their own per test too: one closed at the end of a test may not be gone yet.
  const user = t.user;
  /** The bot in ROOM (as `watcher` sees it join), on the alternate because the configured nick is held. */
  const listen = async (nick: string, watcher: IrcUser, nickReclaimIntervalMs?: number) => {
    const adapter = new IrcAdapter({
      id: 'irc',
      host: '127.0.0.1',
      port: t.irc.port,
      tls: false,
      nick,
      password: t.irc.password,
      channels: [ROOM],
      allowFrom: ['*'],
      floodBurst: 4,
      floodIntervalMs: 100,
      connectTimeoutMs: 5000,
      log: pino({ level: 'debug' }, { write: (s: string) => void logs.push(JSON.parse(s).msg) }),
      ...(nickReclaimIntervalMs === undefined ? {} : { nickReclaimIntervalMs }),
    });
    const delivered: ChannelMessage[] = [];
    const deliver = async (msg: ChannelMessage) => {
      delivered.push(msg);
      return true;
    };
    let connected = false;
    const listening = adapter.listen(deliver, t.stop.signal, () => (connected = true)).catch(() => {});
    await waitFor(() => connected, 10_000);
    await waitFor(() => watcher.lines.some((l) => l.startsWith(`:${alternate(nick)}!`) && / JOIN :?#reclaim/i.test(l)), 10_000);
    expect(adapter.selfName).toBe(alternate(nick));
    return { adapter, delivered, listening };
  };
  /** The server's NICK line for the bot's change back, as another client in its channel sees it. */
  const nickRegained = (watcher: IrcUser, nick: string) => watcher.lines.some((l) => new RegExp(`^:${alternate(nick)}!\\S+ NICK :?${nick}$`).test(l));

  it('takes the nick back when its holder quits in a shared channel; "channeld: hi" is then addressed to the bot', async () => {
    const NICK = 'channeld';
    const holder = await user(NICK, ROOM);
    const bob = await user('bob', ROOM);
    // The default interval (a minute) is longer than this test waits: only the holder's QUIT can bring the nick back.
    const { adapter, delivered, listening } = await listen(NICK, bob);

    // While someone else holds the nick, a line naming it is for them, not for the bot.
    bob.say(ROOM, `${NICK}: this one is for the human`);
    await waitFor(() => delivered.length === 1, 10_000);
    expect(delivered[0]).toMatchObject({ text: `${NICK}: this one is for the human`, addressed: false });

    holder.close();
    await waitFor(() => nickRegained(bob, NICK), 10_000);
    // The server told the bot before it relays anything bob says next.
    bob.say(ROOM, `${NICK}: hi`);
    await waitFor(() => delivered.length === 2, 10_000);
    expect(delivered[1]).toMatchObject({ text: 'hi', addressed: true, chat: { id: ROOM, type: 'group' } });
    expect(adapter.selfName).toBe(NICK);
    expect(logs).toContain('IRC regained the configured nick');
    t.stop.abort(new Error('test over'));
    await listening;
  });

  it('takes the nick back on the timer when its holder leaves unseen (no shared channel)', async () => {
    const NICK = 'chbot';
    const holder = await user(NICK);
    const carol = await user('carol', ROOM);
    const { adapter, delivered, listening } = await listen(NICK, carol, 200);

    // Tries while the nick is still held are refused (433), and the bot stays where it is.
    await waitFor(() => logs.filter((m) => m === 'IRC trying the configured nick again').length >= 2, 10_000);
    expect(adapter.selfName).toBe(alternate(NICK));

    holder.close();
    await waitFor(() => nickRegained(carol, NICK), 10_000);
    carol.say(ROOM, `${NICK}: hi`);
    await waitFor(() => delivered.length === 1, 10_000);
    expect(delivered[0]).toMatchObject({ text: 'hi', addressed: true });
    t.stop.abort(new Error('test over'));
    await listening;
  });
});
