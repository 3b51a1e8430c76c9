import { createRemoteJWKSet, errors, jwtVerify, type JWTPayload } from 'jose';
import { ChannelError } from '../../src/contracts/errors.js';

/** The Bot Connector signs with RS256; anything else is refused. */
const ALGORITHMS = ['RS256'];
/** What jose says about the token itself (401); its other errors are about getting the keys. */
const TOKEN_FAULTS: ReadonlySet<string> = new Set([
  'ERR_JWT_EXPIRED',
  'ERR_JWT_CLAIM_VALIDATION_FAILED',
  'ERR_JWT_INVALID',
  'ERR_JWS_INVALID',
  'ERR_JWS_SIGNATURE_VERIFICATION_FAILED',
  'ERR_JWKS_NO_MATCHING_KEY',
  'ERR_JWKS_MULTIPLE_MATCHING_KEYS',
  'ERR_JOSE_ALG_NOT_ALLOWED',
  'ERR_JOSE_NOT_SUPPORTED',
]);
/** Bot Framework allows five minutes of clock skew. */
const CLOCK_TOLERANCE_S = 300;

export interface ConnectorIdentity {
  issuer: string;
  jwksUri: string;
}

/** The OpenID metadata document: who issues the Connector's tokens and where its keys are. */
export async function fetchOpenIdMetadata(url: string, signal: AbortSignal): Promise<ConnectorIdentity> {
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.any([signal, AbortSignal.timeout(15_000)]) });
  } catch (err) {
    if (signal.aborted) throw err;
    throw new ChannelError('CHANNEL_NETWORK', `Teams: OpenID metadata at ${url} could not be fetched: ${(err as Error).message}`, { cause: err });
  }
  if (!res.ok) {
    await res.body?.cancel().catch(() => {});
    throw new ChannelError(res.status >= 500 ? 'CHANNEL_UNAVAILABLE' : 'CHANNEL_REQUEST_FAILED', `Teams: OpenID metadata at ${url}: HTTP ${res.status}`, {
      retryable: true,
    });
  }
  const doc = (await res.json().catch(() => ({}))) as { issuer?: unknown; jwks_uri?: unknown };
  if (typeof doc.issuer !== 'string' || typeof doc.jwks_uri !== 'string')
    throw new ChannelError('CHANNEL_UNAVAILABLE', `Teams: OpenID metadata at ${url} has no issuer or jwks_uri`);
  return { issuer: doc.issuer, jwksUri: doc.jwks_uri };
}

/** Why a request was refused, for the log (never sent back). */
export class TokenRefused extends Error {}

/**
 * Verifies the Connector's bearer token (jose): signature against the JWKS (refetched when
 * a token names a key it has not seen, so key rollover needs no restart), issuer, audience
 * = app_id, expiry and not-before. Returns the claims and the signing key's endorsements;
 * `serviceurl` and the channel endorsement are checked against the activity once its body is read.
 */
export function connectorVerifier(identity: ConnectorIdentity, appId: string) {
  const keys = createRemoteJWKSet(new URL(identity.jwksUri), { timeoutDuration: 10_000, cooldownDuration: 30_000, cacheMaxAge: 24 * 3600_000 });
  return async (authorization: string | undefined): Promise<{ claims: JWTPayload; endorsed: (channelId: unknown) => boolean }> => {
    const m = /^Bearer ([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)$/.exec(authorization ?? '');
    if (!m) throw new TokenRefused('no bearer token');
    try {
      const { payload, protectedHeader } = await jwtVerify(m[1]!, keys, {
        issuer: identity.issuer,
        audience: appId,
        algorithms: ALGORITHMS,
        clockTolerance: CLOCK_TOLERANCE_S,
        requiredClaims: ['exp'],
      });
      const key = keys.jwks()?.keys.find((k) => k.kid === protectedHeader.kid) as { endorsements?: unknown } | undefined;
      // The Connector's keys name the channels they may sign for (`endorsements`); a key without them endorses any.
      const endorsed = (channelId: unknown) => !Array.isArray(key?.endorsements) || (typeof channelId === 'string' && key.endorsements.includes(channelId));
      return { claims: payload, endorsed };
    } catch (err) {
      if (err instanceof errors.JOSEError && TOKEN_FAULTS.has(err.code)) throw new TokenRefused(`${err.code}: ${err.message}`);
      // Anything else is about fetching the keys (a timeout, a 5xx): not the sender's fault; 503, the Connector retries.
      throw err;
    }
  };
}

/** The serviceUrl claim names the activity's serviceUrl (compared without a trailing slash, case-insensitively as a URL origin+path). */
export function sameServiceUrl(claim: unknown, serviceUrl: unknown): boolean {
  if (typeof claim !== 'string' || typeof serviceUrl !== 'string') return false;
  const norm = (u: string) => u.replace(/\/+$/, '').toLowerCase();
  return norm(claim) === norm(serviceUrl);
}
