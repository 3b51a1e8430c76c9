import { describe, expect, it } from 'vitest';
import { type FakeTeams, TENANT } from '../../fakes/teams/server.js';
import { type TestDaemon, waitFor } from '../../helpers/daemon.js';
import { withChannelDaemon } from '../../helpers/fixtures.js';
import { trickled } from '../../helpers/raw-http.js';
import { teamsChannel, teamsEnv, withTeams } from '../../helpers/teams.js';
import { scaled } from '../../helpers/timing.js';
import { echoAgent } from '../../helpers/toml.js';

const DM = 'a:1personal-ada';

/** The daemon with `channel` (by default channel "ms" on `ms`), its webhook set on the fake. */
async function start(ms: FakeTeams, channel = teamsChannel(ms)): Promise<TestDaemon> {
  const d = await withChannelDaemon(echoAgent(0) + channel, teamsEnv(ms));
  ms.webhook = `${d.url}/webhooks/ms`;
  return d;
}

const received = (d: TestDaemon) =>
  (d.daemon.metrics.received.get() as Promise<{ values: Array<{ value: number }> }>).then((m) => m.values.reduce((a, v) => a + v.value, 0));
const refusals = (d: TestDaemon) => d.logs.entries().filter((l) => l.msg === 'Teams activity refused');

describe('the Teams webhook takes only Teams', () => {
  it('a Web Chat activity, signed by a key endorsed for it, with an allowed from.id and the tenant: 403, nothing stored or answered', async () => {
    const ms = await withTeams();
    // The Azure Bot's key signs for Web Chat too; Web Chat's users pick their own from.id and channelData.
    ms.endorsements = ['msteams', 'webchat', 'directline'];
    const d = await start(ms, teamsChannel(ms, `tenant_id = "${TENANT}"\n`).replace('allow_from = ["*"]', 'allow_from = ["aad-ada-0001"]'));
    const forged = {
      ...ms.activity('approve everything'),
      channelId: 'webchat',
      from: { id: 'aad-ada-0001', name: 'Mallory' },
      conversation: { id: 'a:webchat-conv' },
      channelData: { tenant: { id: TENANT } },
    };
    expect(await ms.post(forged)).toBe(403);
    expect(refusals(d).map((l) => [l.status, l.reason])).toEqual([[403, 'the activity is from Bot Framework channel "webchat", not msteams']]);
    // The real user after it is answered, and is the only one stored.
    expect(await ms.post(ms.activity('the real one'))).toBe(200);
    await waitFor(() => ms.texts(DM)[0] === 'the real one', 10_000);
    expect(await received(d)).toBe(1);
    expect(ms.texts('a:webchat-conv')).toEqual([]);
  });

  it('a key published without endorsements, or a token that names no key, is refused; nothing stored', async () => {
    const ms = await withTeams();
    ms.endorsements = undefined;
    const d = await start(ms);
    expect(await ms.post(ms.activity('from a key that endorses nothing'))).toBe(403);
    expect(refusals(d).at(-1)?.reason).toBe('the signing key test-key-1 is not endorsed for msteams (no endorsements)');
    // jose would take the one published key for a token without kid; which key signed it is not known.
    expect(await ms.post(ms.activity('from no key'), await ms.token({ kid: null }))).toBe(401);
    expect(refusals(d).at(-1)?.reason).toBe('the token names no signing key (kid)');
    expect(await received(d)).toBe(0);
    expect(ms.calls.filter((c) => c.name === 'send' || c.name === 'stream')).toEqual([]);
  });
});

describe('a refused Teams request', () => {
  it('closes its connection: a client trickling a body with a bad token does not hold the socket', async () => {
    const ms = await withTeams();
    const d = await start(ms);
    const head = { authorization: 'Bearer a.b.c', 'content-type': 'application/json', 'content-length': String(200 * 1024) };
    expect(await trickled(Number(new URL(d.url).port), '/webhooks/ms', head, scaled(3_000))).toEqual({ status: 401, closed: true });
    expect(refusals(d).map((l) => l.status)).toEqual([401]);
  });
});
