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

/** Why a request was refused, for the log (never sent back), and its status: 401 for the token, 403 for a key not endorsed for the channel. */
export class TokenRefused extends Error {
  constructor(
    message: string,
    readonly status: 401 | 403 = 401,
  ) {
    super(message);
  }
}

/** What the bot reads of a published key besides the JWK: the channels it may sign for. */
type EndorsedKey = { endorsements?: unknown };

/**
 * Verifies the Connector's bearer token (jose): signature against the JWKS (refetched when
 * a token names a key it has not seen, so key rollover needs no restart), issuer, audience
 * = app_id, expiry and not-before, and that the signing key is endorsed for `channel`. The
 * Connector's keys name the channels they may sign for (`endorsements`); a key that names
 * none, or that cannot be found again by the token's `kid`, endorses nothing (Microsoft's
 * EndorsementsValidator fails on no endorsements; its authentication page says 403). Returns
 * the claims; `serviceurl` is checked against the activity once its body is read.
 */
export function connectorVerifier(identity: ConnectorIdentity, appId: string, channel: string) {
  const keys = createRemoteJWKSet(new URL(identity.jwksUri), { timeoutDuration: 10_000, cooldownDuration: 30_000, cacheMaxAge: 24 * 3600_000 });
  const published = (kid: string) => keys.jwks()?.keys.find((k) => k.kid === kid) as EndorsedKey | undefined;
  return async (authorization: string | undefined): Promise<{ claims: JWTPayload }> => {
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
      const kid = protectedHeader.kid;
      // Without a kid jose takes the one key that fits, but which key signed cannot be told: its endorsements are unknown.
      if (typeof kid !== 'string') throw new TokenRefused('the token names no signing key (kid)');
      // The cached set may have been replaced since the token was verified (a rollover): fetched again, once.
      let key = published(kid);
      if (!key) {
        await keys.reload();
        key = published(kid);
      }
      if (!key) throw new TokenRefused(`the signing key ${kid} is not among the published keys`, 403);
      const endorsements: unknown[] = Array.isArray(key.endorsements) ? key.endorsements : [];
      if (!endorsements.includes(channel))
        throw new TokenRefused(
          `the signing key ${kid} is not endorsed for ${channel} (${endorsements.length ? `only ${endorsements.join(', ')}` : 'no endorsements'})`,
          403,
        );
      return { claims: payload };
    } catch (err) {
      if (err instanceof TokenRefused) throw err;
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
