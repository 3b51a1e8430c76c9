import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

/** The HTTP statuses with which a Streamable HTTP server says it does not know a request's session. */
export type LostSessionStatus = 404 | 400;

/**
 * The status with which a Streamable HTTP server refused a request because it does not know
 * the request's session (it restarted, or the session expired), or undefined for any other
 * failure. Only for a request that carried a session id: one without is refused for lacking it.
 *
 * 404 is the spec's answer. Many deployed servers answer 400 instead: those built on the
 * SDKs' older examples ("Bad Request: No valid session ID provided") and gateways ("Unknown
 * Mcp-Session-Id header"). A 400 counts only when its text names the session, because 400 is
 * also the answer to any other bad request (invalid JSON, an unsupported protocol version),
 * which a new session would not cure. The SDK's error message carries a refused POST's body
 * (its own prefix does not say "session"), so the server's own words are what is matched.
 */
export function lostSessionStatus(err: unknown): LostSessionStatus | undefined {
  if (!(err instanceof StreamableHTTPError)) return undefined;
  if (err.code === 404) return 404;
  return err.code === 400 && /session/i.test(err.message) ? 400 : undefined;
}
