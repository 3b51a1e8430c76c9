import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { header, type TestDaemon, waitFor } from '../helpers/daemon.js';
import { withDaemon } from '../helpers/fixtures.js';

const web = (enabled = true) => `[[channels]]\nid = "web"\ntype = "webchat"\nenabled = ${enabled}\n`;
// A Telegram channel whose API refuses connections: it never comes up.
const down = `[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG_TOKEN"\napi_root = "http://127.0.0.1:9"\nallow_from = ["*"]\n`;

/** Rewrites the file with `ready_requires` in [http] and reloads; the reload must apply. */
async function apply(d: TestDaemon, requires: string, channels: string): Promise<void> {
  writeFileSync(d.configFile, header(d.dir, '', `ready_requires = "${requires}"\n`) + channels);
  const r = await d.daemon.reload();
  expect(r.errors).toEqual([]);
}

describe('[http] ready_requires', () => {
  it('http (the default) is ready with a channel down; any_channel needs one up; all_channels needs every one', async () => {
    const d = await withDaemon(web() + down, { TG_TOKEN: '123:abc' });
    const readyz = async () => {
      const res = await fetch(`${d.url}/readyz`);
      return { status: res.status, body: (await res.json()) as { ready: boolean; ready_requires?: string } };
    };
    const tg = await waitFor(() => d.daemon.status().channels.find((c) => c.id === 'tg' && c.state !== 'starting'));
    expect(await readyz()).toMatchObject({ status: 200, body: { ready: true, ready_requires: 'http' } });
    // The network error names the host and the cause, not "Network request for 'getMe' failed!".
    expect((tg.last_error as { message: string } | null)?.message).toContain('ECONNREFUSED 127.0.0.1:9');

    await apply(d, 'all_channels', web() + down);
    expect(await readyz()).toMatchObject({ status: 503, body: { ready: false, ready_requires: 'all_channels' } });
    expect(d.daemon.status()).toMatchObject({ ready: false, ready_requires: 'all_channels' });

    await apply(d, 'any_channel', web() + down);
    expect(await readyz()).toMatchObject({ status: 200, body: { ready: true, ready_requires: 'any_channel' } });

    await apply(d, 'any_channel', web(false) + down);
    expect((await readyz()).status).toBe(503);
    // The /admin header is coloured by the same verdict.
    expect(await (await fetch(`${d.url}/admin/page.js`)).text()).toContain("status.ready ? 'ready' : 'not-ready'");
  });
});
