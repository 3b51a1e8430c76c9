import { APICallError } from 'ai';
import { ProviderError } from '../contracts/errors.js';

/** The provider's own words from an error body: OpenAI-style `{"error":{"message":…}}`, or the text. */
function providerWords(body: string | undefined, fallback: string): string {
  if (!body) return fallback;
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown } | string; message?: unknown };
    const m = typeof parsed.error === 'string' ? parsed.error : (parsed.error?.message ?? parsed.message);
    if (typeof m === 'string') return m;
  } catch {
    /* not JSON: the text itself */
  }
  return body;
}

/**
 * A provider message fit for the log: the API key and anything shaped like a token masked,
 * cut to 300 characters. (The logger redacts configured secrets too; this also catches a
 * key the provider echoes back in part.)
 */
export function scrubProviderMessage(message: string, apiKey?: string): string {
  let s = message;
  if (apiKey) s = s.split(apiKey).join('[redacted]');
  s = s.replace(/\b(sk|pk|rk|xox[abpr]|gh[pousr]|glpat|AIza)[-_A-Za-z0-9*]{6,}/g, '$1-[redacted]');
  s = s.replace(/\s+/g, ' ').trim();
  return s.length > 300 ? `${s.slice(0, 300)}…` : s;
}

const networkCodes = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
]);

function causeCode(err: unknown): string | undefined {
  for (let e: unknown = err, i = 0; e && i < 6; e = (e as { cause?: unknown }).cause, i++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

/** The error of ours with `code` in `err`'s cause chain (the SDK wraps a failed response body's error). */
function ownCause(err: unknown, code: ProviderError['code']): ProviderError | undefined {
  for (let e: unknown = err, i = 0; e && i < 6; e = (e as { cause?: unknown }).cause, i++) if (e instanceof ProviderError && e.code === code) return e;
  return undefined;
}

/** Sorts a provider failure: connection refused, timeouts, 5xx and 429 are worth retrying. */
export function classifyProviderError(err: unknown, timedOut: boolean): ProviderError {
  // Stopped by us (src/agent/output-cap.ts), maybe inside the SDK's own error: as it was raised.
  const unending = ownCause(err, 'ANSWER_TOO_LONG');
  if (unending) return unending;
  if (timedOut) return new ProviderError('PROVIDER_TIMEOUT', 'the model did not answer in time', { cause: err });
  if (APICallError.isInstance(err)) {
    const status = err.statusCode ?? 0;
    const said = { cause: err, status, providerMessage: providerWords(err.responseBody, err.message) };
    if (status === 429) {
      const after = Number(err.responseHeaders?.['retry-after']);
      return new ProviderError('PROVIDER_RATE_LIMITED', `HTTP 429 from ${err.url}`, {
        ...said,
        ...(Number.isFinite(after) ? { retryAfterMs: after * 1000 } : {}),
      });
    }
    // It was reached and failed: the person reads that the model erred, not that it is unreachable.
    if (status >= 500) return new ProviderError('PROVIDER_FAILED', `HTTP ${status} from ${err.url}`, said);
    if (status === 408) return new ProviderError('PROVIDER_UNAVAILABLE', `HTTP ${status} from ${err.url}`, said);
    if (status === 401 || status === 403) return new ProviderError('PROVIDER_AUTH_FAILED', `HTTP ${status} from ${err.url}`, said);
    if (status >= 400) return new ProviderError('PROVIDER_REFUSED', `HTTP ${status}: ${err.responseBody?.slice(0, 300) ?? err.message}`, said);
    const net = causeCode(err);
    return new ProviderError('PROVIDER_UNAVAILABLE', net ? `${net} reaching ${err.url}` : err.message, { cause: err });
  }
  const net = causeCode(err);
  if (net && networkCodes.has(net)) return new ProviderError('PROVIDER_UNAVAILABLE', net, { cause: err });
  if (err instanceof TypeError && /fetch failed|terminated|network/i.test(err.message))
    return new ProviderError('PROVIDER_UNAVAILABLE', err.message, { cause: err });
  return new ProviderError('PROVIDER_UNAVAILABLE', err instanceof Error ? err.message : String(err), { cause: err, retryable: false });
}
