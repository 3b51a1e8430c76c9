import { describe, expect, it } from 'vitest';
import { formatStatus } from '../../src/actions/builtin/status.js';
import { waitFor } from '../helpers/daemon.js';
import { withChannelDaemon } from '../helpers/fixtures.js';
import { slackEnv, slackHttpChannel, telegramChannel, telegramEnv, withSlack, withTelegram } from '../helpers/platforms.js';
import { teamsChannel, teamsEnv, withTeams } from '../helpers/teams.js';
import { echoAgent as echo } from '../helpers/toml.js';
import { whatsappChannel, whatsappEnv, withWhatsApp } from '../helpers/whatsapp.js';

// One daemon running every webhook kind against its fake: every route it registered under
// /webhooks/ has a declared scheme, the declared schemes are the ones each kind checks, and
// a request without credentials is refused by each. A new ingress without a scheme fails here.

describe('every webhook route declares how it authenticates', () => {
  it('Telegram webhook, Slack HTTP mode, WhatsApp and Teams: each route has its scheme, listed in /status, and refuses a bare request', async () => {
    const [tg, sl, wa, ms] = await Promise.all([withTelegram(), withSlack(), withWhatsApp(), withTeams()]);
    const channels = [
      telegramChannel(tg, 'mode = "webhook"\npublic_url = "https://bot.example.org"\nwebhook_secret_env = "TG_SECRET"\n'),
      slackHttpChannel(sl),
      whatsappChannel(wa),
      teamsChannel(ms),
    ];
    const env = { ...telegramEnv(tg), TG_SECRET: 'hook-secret-123', ...slackEnv(sl, 'signing-secret-123'), ...whatsappEnv(wa), ...teamsEnv(ms) };
    const d = await withChannelDaemon(echo(0) + channels.join('\n'), env);
    // A kind whose route lacks its scheme fails to start with WEBHOOK_AUTH_UNDECLARED: say so, not a timeout.
    const refused = () => d.logs.lines.find((l) => l.includes('WEBHOOK_AUTH_UNDECLARED'));
    await waitFor(() => refused() ?? d.daemon.status().channels.every((c) => c.state === 'connected'), 20_000);
    expect(refused()).toBeUndefined();

    // Walk every registered route: each one under /webhooks/ is in the registry with a scheme.
    const webhooks = d.daemon.http.webhooks();
    const declared = new Map(webhooks.map((w) => [`${w.method} ${w.path}`, w]));
    const routes = d.daemon.http.routes().filter((r) => r.split(' ')[1]!.startsWith('/webhooks/'));
    expect(routes.length).toBeGreaterThan(0);
    for (const route of routes) expect(declared.get(route)?.describe, route).toBeTruthy();
    expect(Object.fromEntries(webhooks.map((w) => [`${w.method} ${w.path}`, w.scheme]))).toEqual({
      'POST /webhooks/tg': 'secret-token',
      'POST /webhooks/sl': 'hmac-sha256',
      'GET /webhooks/wa': 'verify-token',
      'POST /webhooks/wa': 'hmac-sha256',
      'POST /webhooks/ms': 'jwt',
    });

    // /status carries them, and the CLI's status text prints one line each.
    const status = d.daemon.status();
    expect(status.webhooks).toEqual(webhooks);
    expect(formatStatus(status)).toContain('webhook POST /webhooks/ms: jwt (');

    // The declaration matches what the handler does: no credentials, no entry.
    for (const w of webhooks) {
      const res = await fetch(`${d.url}${w.path}`, {
        method: w.method,
        ...(w.method === 'POST' ? { headers: { 'content-type': 'application/json' }, body: '{}' } : {}),
      });
      expect([401, 403], `${w.method} ${w.path}`).toContain(res.status);
    }
  });
});
