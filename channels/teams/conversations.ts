import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/** How many conversations' serviceUrls are kept (the oldest seen is dropped first). */
const MAX_CONVERSATIONS = 5000;
/**
 * Where Teams conversations are served when no activity told us (the documented global
 * endpoint for proactive messages): a reply after a restart in another instance still goes out.
 */
export const DEFAULT_SERVICE_URL = 'https://smba.trafficmanager.net/teams/';

/**
 * Each conversation's serviceUrl, as its last verified activity gave it, kept in
 * `<state_dir>/teams/<id>.json` so a turn recovered after a restart replies to the right place.
 */
export class ServiceUrls {
  readonly #path: string;
  readonly #urls = new Map<string, string>();

  constructor(stateDir: string, channelId: string) {
    const dir = join(stateDir, 'teams');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.#path = join(dir, `${channelId}.json`);
    try {
      const stored = JSON.parse(readFileSync(this.#path, 'utf8')) as Record<string, unknown>;
      for (const [k, v] of Object.entries(stored)) if (typeof v === 'string') this.#urls.set(k, v);
    } catch {
      /* none yet, or unreadable: activities fill it again */
    }
  }

  get(conversationId: string): string {
    return this.#urls.get(conversationId) ?? DEFAULT_SERVICE_URL;
  }

  /** Whether `url` is the serviceUrl of a conversation we were told about (the bot's token goes only there). */
  known(url: string): boolean {
    const origin = new URL(url).origin;
    for (const u of this.#urls.values()) if (new URL(u).origin === origin) return true;
    return false;
  }

  /** Records a verified activity's serviceUrl; written only when it changed. */
  set(conversationId: string, serviceUrl: string): void {
    if (this.#urls.get(conversationId) === serviceUrl) return;
    this.#urls.delete(conversationId);
    this.#urls.set(conversationId, serviceUrl);
    while (this.#urls.size > MAX_CONVERSATIONS) this.#urls.delete(this.#urls.keys().next().value!);
    const tmp = `${this.#path}.tmp`;
    const fd = openSync(tmp, 'w', 0o600);
    try {
      writeSync(fd, JSON.stringify(Object.fromEntries(this.#urls)));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.#path);
  }
}
