import { afterEach, describe, expect, it } from 'vitest';
import { FakeDiscord } from '../fakes/discord/server.js';
import { FakeSlack } from '../fakes/slack/server.js';
import { FakeTelegram } from '../fakes/telegram/server.js';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';

const words = (n: number, p = 'w') => Array.from({ length: n }, (_, i) => `${p}${i}`).join(' ');
const echo = (ms: number) => `[agent]\nprovider = "echo"\necho_delay_ms = ${ms}\n\n`;

/** ack_reaction: on the user's message while the turn runs, gone once the answer has landed. */
describe('ack reaction on each platform', () => {
  let d: TestDaemon | undefined;
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    await d?.stop();
    d = undefined;
    for (const c of closers.splice(0)) await c();
  });

  it('Telegram: setMessageReaction 👀 when stored, an empty reaction list once answered', async () => {
    const tg = new FakeTelegram();
    await tg.start();
    closers.push(() => tg.close());
    d = await startDaemon(`${echo(120)}[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG_TOKEN"\napi_root = "${tg.url}"\nallow_from = ["*"]\nnative_drafts = false\nack_reaction = "👀"\n`, { TG_TOKEN: tg.token });
    await d.daemon.supervisor.firstAttempts();
    const u = tg.dm(words(10));
    const key = `42:${u.message.message_id}`;
    await waitFor(() => tg.reactions.get(key)?.[0] === '👀', 5000);
    // The answer is not held back by the reaction: it streams while the reaction is on.
    await waitFor(() => tg.texts(42)[0] === words(10), 10_000);
    await waitFor(() => tg.reactions.get(key)?.length === 0, 5000);
    expect(tg.callsOf('setMessageReaction').map((c) => c.body.reaction)).toEqual([[{ type: 'emoji', emoji: '👀' }], []]);
  });

  it('Discord: PUT the own reaction when stored, DELETE it once answered', async () => {
    const dc = new FakeDiscord();
    await dc.start();
    closers.push(() => dc.close());
    d = await startDaemon(`${echo(120)}[[channels]]\nid = "dc"\ntype = "discord"\ntoken_env = "DC_TOKEN"\nrest_api = "${dc.restApi}"\nallow_from = ["*"]\nack_reaction = "👀"\n`, { DC_TOKEN: dc.token });
    await d.daemon.supervisor.firstAttempts();
    const id = dc.dm(words(10));
    const key = `${dc.dmChannel}:${id}`;
    await waitFor(() => dc.reactions.get(key)?.[0] === '👀', 5000);
    await waitFor(() => dc.texts(dc.dmChannel)[0] === words(10), 10_000);
    await waitFor(() => dc.reactions.get(key)?.length === 0, 5000);
    expect(dc.rest.filter((c) => c.path.includes('/reactions/')).map((c) => c.method)).toEqual(['PUT', 'DELETE']);
  });

  it('Slack: reactions.add with the emoji name when stored, reactions.remove once answered', async () => {
    const sl = new FakeSlack();
    await sl.start();
    closers.push(() => sl.close());
    d = await startDaemon(`${echo(120)}[[channels]]\nid = "sl"\ntype = "slack"\nbot_token_env = "SL_BOT"\napp_token_env = "SL_APP"\napi_url = "${sl.apiUrl}"\nallow_from = ["*"]\nnative_stream = false\nack_reaction = "👀"\n`, { SL_BOT: sl.botToken, SL_APP: sl.appToken });
    await d.daemon.supervisor.firstAttempts();
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
    const tg = new FakeTelegram();
    await tg.start();
    closers.push(() => tg.close());
    d = await startDaemon(`${echo(150)}[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG_TOKEN"\napi_root = "${tg.url}"\nallow_from = ["*"]\nnative_drafts = false\nack_reaction = "👀"\n`, { TG_TOKEN: tg.token });
    await d.daemon.supervisor.firstAttempts();
    tg.dm(words(30));
    const queued = tg.dm('waiting behind it');
    const key = `42:${queued.message.message_id}`;
    await waitFor(() => tg.reactions.get(key)?.[0] === '👀', 5000);
    tg.dm('/stop');
    await waitFor(() => tg.reactions.get(key)?.length === 0, 5000);
    expect(tg.texts(42).join('\n')).not.toContain('waiting behind it');
  });
});
