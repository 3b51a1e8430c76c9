import { afterEach, describe, expect, it } from 'vitest';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { ChatClient } from '../helpers/webchat-client.js';

const config = `[agent]\nprovider = "echo"\necho_delay_ms = 120\n\n[[channels]]\nid = "web"\ntype = "webchat"\n`;

describe('web chat, end to end', () => {
  let d: TestDaemon | undefined;
  let clients: ChatClient[] = [];
  afterEach(async () => {
    for (const c of clients) c.close();
    clients = [];
    await d?.stop();
    d = undefined;
  });

  it('streams the echo as a live draft: at least two edits, then a final text equal to the echo', async () => {
    d = await startDaemon(config);
    const c = new ChatClient(d.url, 'tab-1');
    clients.push(c);
    await c.opened;
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
    d = await startDaemon(config);
    const a = new ChatClient(d.url, 'tab-a');
    const b = new ChatClient(d.url, 'tab-b');
    clients.push(a, b);
    await Promise.all([a.opened, b.opened]);
    a.send('alpha one');
    b.send('beta two');
    expect((await a.finals())[0]!.text).toBe('alpha one');
    expect((await b.finals())[0]!.text).toBe('beta two');
    expect(a.replies().every((f) => !f.text!.includes('beta'))).toBe(true);
  });

  it('a resent message id (reconnect) is answered once', async () => {
    d = await startDaemon(config);
    const c = new ChatClient(d.url, 'tab-dup');
    clients.push(c);
    await c.opened;
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
    d = await startDaemon(config);
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
      channels: [{ id: 'web', kind: 'webchat', state: 'connected', since: expect.any(String), attempts: 0, next_retry_at: null, last_error: null, connection: 1, in_flight: 0, queued: 0 }],
    });
    const metrics = await (await fetch(`${d.url}/metrics`)).text();
    expect(metrics).toContain('channeld_messages_received_total');
    expect(metrics).toContain('channeld_turn_duration_seconds');
  });

  it('with access_token_env set, a wrong token is refused (401) and the right one accepted', async () => {
    d = await startDaemon(`${config}access_token_env = "WEB_TOKEN"\n`, { WEB_TOKEN: 'let-me-in-please' });
    const bad = new ChatClient(d.url, 'tab-x', 'wrong-token');
    await expect(bad.opened).rejects.toThrow(/401/);
    const good = new ChatClient(d.url, 'tab-y', 'let-me-in-please');
    clients.push(good);
    await good.opened;
    good.send('with token');
    expect((await good.finals())[0]!.text).toBe('with token');
  });

  it('answers /help from the command registry, not the agent', async () => {
    d = await startDaemon(config);
    const c = new ChatClient(d.url, 'tab-help');
    clients.push(c);
    await c.opened;
    c.send('/help');
    const [final] = await c.finals();
    expect(final!.text).toContain('/help');
    expect(final!.text).toContain('/stop');
    expect(final!.text).toContain('/status');
  });
});
