import type { LoadedConfig } from '../config/load.js';
import type { DaemonConfig } from '../config/schema.js';
import type { Secrets } from '../config/secrets.js';

/** How the last reload went, as /status reports it. */
export interface ReloadRecord {
  ok: boolean;
  at: string;
  errors: string[];
}

/**
 * The `config` service: the validated config in force, replaced as a whole by a reload.
 * Components keep this object and read `config`/`secrets` when they need a value, so what
 * they see is always the current generation.
 */
export class LiveConfig {
  #loaded: LoadedConfig;
  #generation = 1;
  /** The last reload's outcome; null until the first one. */
  lastReload: ReloadRecord | null = null;

  /** `env` is the daemon's environment: secrets were resolved in it, MCP servers read it. */
  constructor(
    loaded: LoadedConfig,
    readonly env: NodeJS.ProcessEnv,
  ) {
    this.#loaded = loaded;
  }

  get loaded(): LoadedConfig {
    return this.#loaded;
  }
  get config(): DaemonConfig {
    return this.#loaded.config;
  }
  get secrets(): Secrets {
    return this.#loaded.secrets;
  }
  /** Counts applied configs: 1 at start, +1 per applied reload. */
  get generation(): number {
    return this.#generation;
  }

  /** Puts a new validated config in force (a reload that passed its checks). */
  replace(next: LoadedConfig): void {
    this.#loaded = next;
    this.#generation++;
  }
}
