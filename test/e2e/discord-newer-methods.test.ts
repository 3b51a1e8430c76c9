import { beforeEach, describe, expect, it } from 'vitest';
import type { FakeDiscord } from '../fakes/discord/server.js';
import { waitFor } from '../helpers/daemon.js';
import { withChannelDaemon } from '../helpers/fixtures.js';
import { discordChannel, discordEnv, withDiscord } from '../helpers/platforms.js';
import { echoAgent } from '../helpers/toml.js';

const QUESTIONS = ['first question here', 'second question here', 'third question here', 'fourth question here'];
const LOG = 'this Discord API does not take enforce_nonce; sending without it from now on';

/** Sends each DM in turn (one conversation: the turns run in order) and waits for its answer. */
async function askAll(dc: FakeDiscord): Promise<void> {
  for (const q of QUESTIONS) {
    dc.dm(q);
    await waitFor(() => dc.texts(dc.dmChannel).includes(q), 15_000);
  }
}

const enforced = (dc: FakeDiscord) => dc.restCalls('POST', 'message').filter((c) => c.body?.enforce_nonce !== undefined);

/** A Discord-compatible server without `enforce_nonce` (the newer field the adapter sends): every answer still arrives, once. */
describe('Discord: a server that does not take enforce_nonce', () => {
  let dc: FakeDiscord;
  beforeEach(async () => {
    dc = await withDiscord();
  });

  it('refused as an unknown form field: the message goes without it, at once and from then on', async () => {
    dc.enforceNonceAnswer = { status: 400 };
    const d = await withChannelDaemon(echoAgent(0) + discordChannel(dc), discordEnv(dc));
    await askAll(dc);
    expect(dc.texts(dc.dmChannel)).toEqual(QUESTIONS);
    expect(enforced(dc)).toHaveLength(1);
    // The nonce still goes: it is the field that was new, not the nonce.
    expect(dc.restCalls('POST', 'message').every((c) => typeof c.body?.nonce === 'string')).toBe(true);
    expect(d.logs.text.split(LOG).length - 1).toBe(1);
  });

  it('failed with HTTP 502 and a proxy page: each answer arrives once, and the field goes off after three such sends', async () => {
    dc.enforceNonceAnswer = { status: 502, raw: '<html><body>502 Bad Gateway</body></html>' };
    const d = await withChannelDaemon(echoAgent(0) + discordChannel(dc), discordEnv(dc));
    await askAll(dc);
    expect(dc.texts(dc.dmChannel)).toEqual(QUESTIONS);
    expect(dc.messages.filter((m) => !m.deleted)).toHaveLength(QUESTIONS.length);
    // Three sends, each tried by discord.js 4 times (3 retries on a 5xx), then never again.
    expect(enforced(dc)).toHaveLength(12);
    expect(d.logs.text.split(LOG).length - 1).toBe(1);
  });
});
