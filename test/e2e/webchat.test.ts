import { describe, expect, it } from 'vitest';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChat, withDaemon } from '../helpers/fixtures.js';
import { echoAgent, webchatChannel } from '../helpers/toml.js';
import { ChatClient } from '../helpers/webchat-client.js';

const config = echoAgent(120) + webchatChannel();

describe('web chat, end to end', () => {
  let d: TestDaemon | undefined;

  it('streams the echo as a live draft: at least two edits, then a final text equal to the echo', async () => {
    d = await withDaemon(config);
    const c = await withChat(d, 'tab-1');
    c.send('hello there world');
    const [final] = await c.finals();
    expect(final!.text).toBe('hello there world');
    const drafts = c.replies().filter((f) => f.ref === final!.ref && !f.final);
    expect(drafts.length).toBeGreaterThanOrEqual(2);
    // Each draft is a prefix of the answer: edits replace the text, they never append.
    for (const f of drafts) expect('hello there world'.startsWith(f.text!)).toBe(true);
    expect(c.frames.some((f) => f.type === 'ack')).toBe(true);
  });

  it('answers each tab in its own conversation', async () => {
    d = await withDaemon(config);
    const [a, b] = await Promise.all([withChat(d, 'tab-a'), withChat(d, 'tab-b')]);
    a.send('alpha one');
    b.send('beta two');
    expect((await a.finals())[0]!.text).toBe('alpha one');
    expect((await b.finals())[0]!.text).toBe('beta two');
    expect(a.replies().every((f) => !f.text!.includes('beta'))).toBe(true);
  });

  it('a resent message id (reconnect) is answered once', async () => {
    d = await withDaemon(config);
    const c = await withChat(d, 'tab-dup');
    c.send('only once', 'same-id');
    c.send('only once', 'same-id');
    await c.finals();
    // The second copy was recognised (and dropped) by the inbox: it can no longer start a turn.
    await waitFor(async () => (await d!.daemon.metrics.duplicates.get()).values[0]?.value === 1);
    await waitFor(() => d!.daemon.status().turns.list.length === 0);
    const refs = new Set(c.replies().map((f) => f.ref));
    expect(refs.size).toBe(1);
    expect((await d.daemon.metrics.received.get()).values.map((v) => v.value)).toEqual([1]);
  });

  it('serves the page at / and answers /healthz, /readyz, /status and /metrics', async () => {
    d = await withDaemon(config);
    const page = await fetch(`${d.url}/`);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(await page.text()).toContain('<textarea');
    expect((await fetch(`${d.url}/healthz`)).status).toBe(200);
    await d.daemon.supervisor.firstAttempts();
    const ready = await fetch(`${d.url}/readyz`);
    expect(ready.status).toBe(200);
    const status = (await (await fetch(`${d.url}/status`)).json()) as Record<string, unknown>;
    expect(status).toMatchObject({
      version: expect.any(String),
      pid: process.pid,
      generation: 1,
      ready: true,
      turns: { in_flight: 0, queued: 0, list: [] },
      agents: [{ name: 'default', provider: 'echo', model: 'echo', fallback_models: [], cooling: [], last_served: null }],
      last_reload: null,
      channels: [
        {
          id: 'web',
          kind: 'webchat',
          state: 'connected',
          since: expect.any(String),
          attempts: 0,
          next_retry_at: null,
          last_error: null,
          connection: 1,
          in_flight: 0,
          queued: 0,
        },
      ],
    });
    const metrics = await (await fetch(`${d.url}/metrics`)).text();
    expect(metrics).toContain('channeld_messages_received_total');
    expect(metrics).toContain('channeld_turn_duration_seconds');
  });

  it('with access_token_env set, a wrong token is refused (401) and the right one accepted', async () => {
    d = await withDaemon(`${config}access_token_env = "WEB_TOKEN"\n`, { WEB_TOKEN: 'let-me-in-please' });
    const bad = new ChatClient(d.url, 'tab-x', 'wrong-token');
    await expect(bad.opened).rejects.toThrow(/401/);
    const good = await withChat(d, 'tab-y', { token: 'let-me-in-please' });
    good.send('with token');
    expect((await good.finals())[0]!.text).toBe('with token');
  });

  it('answers /help from the command registry, not the agent', async () => {
    d = await withDaemon(config);
    const c = await withChat(d, 'tab-help');
    c.send('/help');
    const [final] = await c.finals();
    expect(final!.text).toContain('/help');
    expect(final!.text).toContain('/stop');
    expect(final!.text).toContain('/status');
  });
});
