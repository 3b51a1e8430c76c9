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

  it('failed with HTTP 502 and a proxy page on every send carrying it: each answer arrives once, and the field goes off after three such sends in a row', async () => {
    dc.enforceNonceAnswer = { status: 502, raw: '<html><body>502 Bad Gateway</body></html>' };
    const d = await withChannelDaemon(echoAgent(0) + discordChannel(dc), discordEnv(dc));
    await askAll(dc);
    expect(dc.texts(dc.dmChannel)).toEqual(QUESTIONS);
    expect(dc.messages.filter((m) => !m.deleted)).toHaveLength(QUESTIONS.length);
    // Three sends (the first reply and its two retries), each tried by discord.js 4 times, then never again.
    expect(enforced(dc)).toHaveLength(12);
    expect(d.logs.text.split(LOG).length - 1).toBe(1);
  });

  it('a 504 after Discord stored the reply (on every try of discord.js) is no refusal: the retry keeps nonce and field, one message each', async () => {
    const d = await withChannelDaemon(echoAgent(0) + discordChannel(dc), discordEnv(dc));
    for (const q of QUESTIONS) {
      // The first post of each reply, and discord.js's 3 retries of it, land and are answered 504.
      dc.fail('POST message', { status: 504, afterStoring: true }, 4);
      dc.dm(q);
      await waitFor(() => dc.texts(dc.dmChannel).includes(q), 15_000);
    }
    expect(dc.texts(dc.dmChannel)).toEqual(QUESTIONS);
    expect(dc.messages.filter((m) => !m.deleted)).toHaveLength(QUESTIONS.length);
    // Each reply: 4 tries that failed, then the stream's retry, which Discord answered with the stored message.
    expect(dc.restCalls('POST', 'message')).toHaveLength(QUESTIONS.length * 5);
    expect(enforced(dc)).toHaveLength(QUESTIONS.length * 5);
    expect(d.logs.text).not.toContain(LOG);
  });
});
