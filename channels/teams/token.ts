import { ChannelError } from '../../src/contracts/errors.js';

/** Renewed this long before it expires, so a request never carries a token that lapses on the way. */
const RENEW_BEFORE_MS = 5 * 60_000;
const SCOPE = 'https://api.botframework.com/.default';

/**
 * The bot's own bearer token for the Connector (OAuth client credentials), cached until
 * shortly before it expires; concurrent callers share one request.
 */
export class BotToken {
  #token: { value: string; renewAtMs: number } | undefined;
  #pending: Promise<string> | undefined;

  constructor(
    readonly tokenUrl: string,
    readonly appId: string,
    readonly password: string,
  ) {}

  async get(signal: AbortSignal): Promise<string> {
    if (this.#token && Date.now() < this.#token.renewAtMs) return this.#token.value;
    // A caller already gone starts nothing.
    signal.throwIfAborted();
    const pending = (this.#pending ??= this.#shared());
    return await new Promise<string>((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      pending.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
    });
  }

  /**
   * One fetch for every caller until it settles. Not cut by one caller's signal (the next
   * caller may still want it), so every caller may have stopped waiting by the time it fails:
   * its own handler keeps that failure from being an unhandled rejection, which ends the process.
   */
  #shared(): Promise<string> {
    const shared = this.#fetch().finally(() => {
      this.#pending = undefined;
    });
    shared.catch(() => {});
    return shared;
  }

  /** Forgets the token (the Connector refused it). */
  reset(): void {
    this.#token = undefined;
  }

  async #fetch(): Promise<string> {
    const body = new URLSearchParams({ grant_type: 'client_credentials', client_id: this.appId, client_secret: this.password, scope: SCOPE });
    let res: Response;
    try {
      res = await fetch(this.tokenUrl, { method: 'POST', body, signal: AbortSignal.timeout(20_000) });
    } catch (err) {
      throw new ChannelError('CHANNEL_NETWORK', `Teams token: ${this.tokenUrl} could not be reached: ${(err as Error).message}`, { cause: err });
    }
    const json = (await res.json().catch(() => ({}))) as { access_token?: unknown; expires_in?: unknown; error?: unknown; error_description?: unknown };
    if (res.status === 400 || res.status === 401) {
      const why = `${typeof json.error === 'string' ? json.error : res.status}${typeof json.error_description === 'string' ? `: ${json.error_description.slice(0, 200)}` : ''}`;
      throw new ChannelError(
        'CHANNEL_AUTH_FAILED',
        `Teams token: the app id or password was refused (${why}); check app_id and app_password_env/app_password_file`,
      );
    }
    if (!res.ok || typeof json.access_token !== 'string')
      throw new ChannelError(res.status === 429 ? 'CHANNEL_RATE_LIMITED' : 'CHANNEL_UNAVAILABLE', `Teams token: HTTP ${res.status}`);
    const lifetimeMs = (typeof json.expires_in === 'number' ? json.expires_in : Number(json.expires_in) || 3600) * 1000;
    this.#token = { value: json.access_token, renewAtMs: Date.now() + Math.max(lifetimeMs - RENEW_BEFORE_MS, lifetimeMs / 2) };
    return json.access_token;
  }
}
