import { describe, expect, it } from 'vitest';
import { CodedError } from '../../../src/contracts/errors.js';
import type { RouteAuth } from '../../../src/contracts/http.js';
import { HttpServer } from '../../../src/observe/http-server.js';

// The webhook-auth registry: a route under /webhooks/ answers the internet, so it must say
// how it authenticates when it is registered. No socket is needed: registration is the check.

const ok = () => {};
const refusal = (fn: () => unknown): CodedError => {
  try {
    fn();
  } catch (err) {
    if (err instanceof CodedError) return err;
    throw err;
  }
  throw new Error('registration was not refused');
};

describe('webhook routes declare their authentication', () => {
  it('a /webhooks/ route without auth is refused with WEBHOOK_AUTH_UNDECLARED and not registered', () => {
    const http = new HttpServer();
    for (const path of ['/webhooks/tg', '/webhooks/*']) {
      const err = refusal(() => http.route('POST', path, ok));
      expect(err.code).toBe('WEBHOOK_AUTH_UNDECLARED');
      expect(err.message).toContain(`POST ${path} has no auth`);
    }
    expect(http.routes()).toEqual([]);
    expect(http.webhooks()).toEqual([]);
  });

  it('an unknown scheme or an empty description is refused too', () => {
    const http = new HttpServer();
    const bad: RouteAuth[] = [{ scheme: 'none', describe: 'trust me' } as unknown as RouteAuth, { scheme: 'jwt', describe: '  ' }];
    for (const auth of bad) expect(refusal(() => http.route('POST', '/webhooks/x', ok, auth)).code).toBe('WEBHOOK_AUTH_UNDECLARED');
    expect(http.routes()).toEqual([]);
  });

  it('declared routes are listed with their scheme and leave the list when removed; other routes need none', () => {
    const http = new HttpServer();
    const removeGet = http.route('GET', '/webhooks/wa', ok, { scheme: 'verify-token', describe: 'hub.verify_token' });
    const removePost = http.route('POST', '/webhooks/wa', ok, { scheme: 'hmac-sha256', describe: 'X-Hub-Signature-256' });
    const removeStatus = http.route('GET', '/healthz', ok);
    // Only the path segment counts: /webhooksfoo is not a webhook route.
    http.route('GET', '/webhooksfoo', ok);
    expect(http.webhooks()).toEqual([
      { method: 'GET', path: '/webhooks/wa', scheme: 'verify-token', describe: 'hub.verify_token' },
      { method: 'POST', path: '/webhooks/wa', scheme: 'hmac-sha256', describe: 'X-Hub-Signature-256' },
    ]);
    removePost();
    expect(http.webhooks().map((w) => `${w.method} ${w.path}`)).toEqual(['GET /webhooks/wa']);
    removeGet();
    removeStatus();
    expect(http.webhooks()).toEqual([]);
    expect(http.routes()).toEqual(['GET /webhooksfoo']);
  });
});
