import type { Logger } from 'pino';

/**
 * Node's process warnings (DEP0040 punycode, DEP0169 url.parse, … from bundled SDKs: bundling
 * moves them out of node_modules, where Node would hide deprecations) written as log lines
 * instead of Node's own stderr text, so the output stays one JSON object per line. Each
 * distinct warning is logged once, at `warn`.
 */
export class ProcessWarnings {
  readonly #seen = new Set<string>();
  readonly #pending: Error[] = [];
  #log: Logger | undefined;
  readonly #listener = (warning: Error) => this.#take(warning);

  /** Replaces Node's printing listener; warnings wait until `route` gives them a logger. */
  capture(): this {
    process.removeAllListeners('warning');
    process.on('warning', this.#listener);
    return this;
  }

  /** Logs the warnings so far and every later one through `log`. */
  route(log: Logger): void {
    this.#log = log;
    for (const w of this.#pending.splice(0)) this.#write(w);
  }

  #take(warning: Error): void {
    const code = (warning as NodeJS.ErrnoException).code;
    const key = `${warning.name}:${code ?? warning.message}`;
    if (this.#seen.has(key)) return;
    this.#seen.add(key);
    if (this.#log) this.#write(warning);
    else this.#pending.push(warning);
  }

  #write(warning: Error): void {
    const code = (warning as NodeJS.ErrnoException).code;
    this.#log?.warn({ warning: { name: warning.name, ...(code ? { code } : {}) } }, `node: ${code ? `[${code}] ` : ''}${warning.name}: ${warning.message}`);
  }
}
