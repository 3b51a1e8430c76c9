import { APICallError } from 'ai';
import type { ErrorCode } from '../errors.js';

export interface ProviderFailure {
  code: ErrorCode;
  retryable: boolean;
  retryAfterMs?: number;
  detail: string;
}

const networkCodes = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT']);

function causeCode(err: unknown): string | undefined {
  for (let e: unknown = err, i = 0; e && i < 6; e = (e as { cause?: unknown }).cause, i++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

/** Sorts a provider failure: connection refused, timeouts, 5xx and 429 are worth retrying. */
export function classifyProviderError(err: unknown, timedOut: boolean): ProviderFailure {
  if (timedOut) return { code: 'PROVIDER_TIMEOUT', retryable: true, detail: 'the model did not answer in time' };
  if (APICallError.isInstance(err)) {
    const status = err.statusCode ?? 0;
    if (status === 429) {
      const after = Number(err.responseHeaders?.['retry-after']);
      return { code: 'PROVIDER_RATE_LIMITED', retryable: true, ...(Number.isFinite(after) ? { retryAfterMs: after * 1000 } : {}), detail: `HTTP 429 from ${err.url}` };
    }
    if (status >= 500 || status === 408) return { code: 'PROVIDER_UNAVAILABLE', retryable: true, detail: `HTTP ${status} from ${err.url}` };
    if (status >= 400) return { code: 'PROVIDER_REFUSED', retryable: false, detail: `HTTP ${status}: ${err.responseBody?.slice(0, 300) ?? err.message}` };
    const net = causeCode(err);
    return { code: 'PROVIDER_UNAVAILABLE', retryable: true, detail: net ? `${net} reaching ${err.url}` : err.message };
  }
  const net = causeCode(err);
  if (net && networkCodes.has(net)) return { code: 'PROVIDER_UNAVAILABLE', retryable: true, detail: net };
  if (err instanceof TypeError && /fetch failed|terminated|network/i.test(err.message)) return { code: 'PROVIDER_UNAVAILABLE', retryable: true, detail: err.message };
  return { code: 'PROVIDER_UNAVAILABLE', retryable: false, detail: err instanceof Error ? err.message : String(err) };
}
