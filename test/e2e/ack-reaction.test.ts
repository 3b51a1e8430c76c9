import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { withChannelDaemon } from '../helpers/fixtures.js';
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
import { echoAgent as echo } from '../helpers/toml.js';

const words = (n: number, p = 'w') => Array.from({ length: n }, (_, i) => `${p}${i}`).join(' ');
const ack = 'ack_reaction = "👀"\n';

/** ack_reaction: on the user's message while the turn runs, gone once the answer has landed. */
describe('ack reaction on each platform', () => {
  it('Telegram: setMessageReaction 👀 when stored, an empty reaction list once answered', async () => {
    const tg = await withTelegram();
    await withChannelDaemon(echo(120) + telegramChannel(tg, ack), telegramEnv(tg));
    const u = tg.dm(words(10));
    const key = `42:${u.message.message_id}`;
    await waitFor(() => tg.reactions.get(key)?.[0] === '👀', 5000);
    // The answer is not held back by the reaction: it streams while the reaction is on.
    await waitFor(() => tg.texts(42)[0] === words(10), 10_000);
    await waitFor(() => tg.reactions.get(key)?.length === 0, 5000);
    expect(tg.callsOf('setMessageReaction').map((c) => c.body.reaction)).toEqual([[{ type: 'emoji', emoji: '👀' }], []]);
  });

  it('Discord: PUT the own reaction when stored, DELETE it once answered', async () => {
    const dc = await withDiscord();
    await withChannelDaemon(echo(120) + discordChannel(dc, ack), discordEnv(dc));
    const id = dc.dm(words(10));
    const key = `${dc.dmChannel}:${id}`;
    await waitFor(() => dc.reactions.get(key)?.[0] === '👀', 5000);
    await waitFor(() => dc.texts(dc.dmChannel)[0] === words(10), 10_000);
    await waitFor(() => dc.reactions.get(key)?.length === 0, 5000);
    expect(dc.rest.filter((c) => c.path.includes('/reactions/')).map((c) => c.method)).toEqual(['PUT', 'DELETE']);
  });

  it('Slack: reactions.add with the emoji name when stored, reactions.remove once answered', async () => {
    const sl = await withSlack();
    await withChannelDaemon(echo(120) + slackChannel(sl, `native_stream = false\n${ack}`), slackEnv(sl));
    const ev = sl.dmEvent(words(10));
    sl.push(ev);
    const key = `D0DM0001:${ev.ts as string}`;
    await waitFor(() => sl.reactions.get(key)?.[0] === 'eyes', 5000);
    await waitFor(() => sl.texts('D0DM0001')[0] === words(10), 10_000);
    await waitFor(() => sl.reactions.get(key)?.length === 0, 5000);
    expect(sl.callsOf('reactions.add')).toHaveLength(1);
    expect(sl.callsOf('reactions.remove')).toHaveLength(1);
  });

  it('a turn that ends with no reply (dropped by /stop) takes its reaction off too', async () => {
    const tg = await withTelegram();
    await withChannelDaemon(echo(150) + telegramChannel(tg, ack), telegramEnv(tg));
    tg.dm(words(30));
    const queued = tg.dm('waiting behind it');
    const key = `42:${queued.message.message_id}`;
    await waitFor(() => tg.reactions.get(key)?.[0] === '👀', 5000);
    tg.dm('/stop');
    await waitFor(() => tg.reactions.get(key)?.length === 0, 5000);
    expect(tg.texts(42).join('\n')).not.toContain('waiting behind it');
  });
});
