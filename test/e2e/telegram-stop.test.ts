import { beforeEach, describe, expect, it } from 'vitest';
import { STOP_MARKER } from '../../src/stream/reply-stream.js';
import type { FakeTelegram } from '../fakes/telegram/server.js';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChannelDaemon } from '../helpers/fixtures.js';
import { telegramChannel, telegramEnv, withTelegram } from '../helpers/platforms.js';
import { echoAgent } from '../helpers/toml.js';

const words = (n: number, p: string) => Array.from({ length: n }, (_, i) => `${p}${i}`).join(' ');
const GROUP = -1001234;

/** /stop in a Telegram group, through the real normalizer: who may stop what. */
describe('Telegram /stop in groups', () => {
  let tg: FakeTelegram;
  let d: TestDaemon | undefined;
  beforeEach(async () => {
    tg = await withTelegram();
  });

  const ada = { id: 43, first_name: 'Ada' };
  const bob = { id: 44, first_name: 'Bob' };
  const start = async () => {
    d = await withChannelDaemon(echoAgent(120) + telegramChannel(tg, 'rich_messages = false\n'), telegramEnv(tg));
  };
  const idle = () => waitFor(() => d!.daemon.status().turns.in_flight === 0 && d!.daemon.status().turns.queued === 0, 15_000);

  it("a member's /stop@bot leaves another member's answer running; a bare /stop from someone with nothing running is left alone", async () => {
    await start();
    tg.group(words(20, 'a'), { from: ada, mention: true });
    await waitFor(() => tg.texts(GROUP).length === 1, 10_000);
    tg.group('/stop', { from: bob });
    tg.group(`/stop@${tg.bot.username}`, { from: bob, command: true });
    await waitFor(() => tg.texts(GROUP).includes('Nothing to stop.'), 10_000);
    await waitFor(() => tg.texts(GROUP)[0] === `@${tg.bot.username} ${words(20, 'a')}`, 15_000);
    await idle();
    expect(tg.texts(GROUP)).toHaveLength(2);
  });

  it('a bare /stop from the member whose answer runs stops it: one visible result', async () => {
    await start();
    tg.group(words(40, 'a'), { from: ada, mention: true });
    await waitFor(() => tg.texts(GROUP).length === 1, 10_000);
    tg.group('/stop', { from: ada });
    await waitFor(() => tg.texts(GROUP)[0]!.endsWith(STOP_MARKER), 10_000);
    await idle();
    expect(tg.texts(GROUP)).toHaveLength(1);
    expect(tg.texts(GROUP)[0]).not.toContain('a39');
  });
});
