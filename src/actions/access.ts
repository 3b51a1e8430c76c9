import type { IncomingMessage } from 'node:http';
import { isLoopbackClient, secretEquals } from '../util/http-helpers.js';

/**
 * Management routes answer loopback clients only (a request relayed by a proxy is not
 * one, see `isLoopbackClient`), unless an admin token is configured:
 * then every request needs it as a bearer token (or `?token=` for EventSource, which
 * cannot send headers), compared in constant time.
 */
export function checkAdmin(req: Pick<IncomingMessage, 'headers' | 'socket'>, url: URL, adminToken: string | undefined): 'ok' | 'forbidden' | 'unauthorized' {
  if (adminToken === undefined) return isLoopbackClient(req) ? 'ok' : 'forbidden';
  const given = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? url.searchParams.get('token') ?? '';
  return secretEquals(given, adminToken) ? 'ok' : 'unauthorized';
}
