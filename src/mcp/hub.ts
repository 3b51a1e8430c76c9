import type { McpServerConfig } from '../config/schema.js';
import { raceAbort, settleWithin } from '../util/abortable.js';
import type { Logger } from '../observe/logger.js';
import type { Tool } from '../contracts/tools.js';
import type { McpServer, McpServerStatus } from './server.js';

/** The MCP SDK and the AI SDK take seconds to import on a busy machine: loaded only once a server is configured. */
type McpModules = { McpServer: typeof McpServer; mcpTools: typeof import('./mcp-tools.js').mcpTools };
let modules: Promise<McpModules> | undefined;
function loadModules(): Promise<McpModules> {
  modules ??= Promise.all([import('./server.js'), import('./mcp-tools.js')]).then(([server, tools]) => ({
    McpServer: server.McpServer,
    mcpTools: tools.mcpTools,
  }));
  return modules;
}

export interface McpHubOptions {
  log: Logger;
  env: NodeJS.ProcessEnv;
  /** How long a stopping server may take to close. */
  graceMs: () => number;
}

/**
 * Every agent's MCP servers. They live here rather than in a workspace, so a reload that
 * rebuilds an agent's workspace keeps the servers whose table did not change running, and
 * restarts only the changed ones.
 */
export class McpHub {
  readonly #o: McpHubOptions;
  /** agent → server name → server. */
  readonly #agents = new Map<string, Map<string, McpServer>>();
  #mod: McpModules | undefined;

  constructor(options: McpHubOptions) {
    this.#o = options;
  }

  /**
   * Makes an agent's running servers match `configs`: removed and changed ones stop, added
   * and changed ones start, unchanged ones are not touched. Returns the names restarted or started.
   */
  async sync(agent: string, configs: readonly McpServerConfig[]): Promise<string[]> {
    const current = this.#agents.get(agent) ?? new Map<string, McpServer>();
    const wanted = new Map(configs.map((c) => [c.name, c]));
    const stopping: Promise<void>[] = [];
    for (const [name, server] of current) {
      const next = wanted.get(name);
      if (next && JSON.stringify(next) === JSON.stringify(server.config)) continue;
      current.delete(name);
      stopping.push(server.stop(this.#o.graceMs()));
    }
    await Promise.all(stopping);
    const started: string[] = [];
    if (wanted.size) this.#mod ??= await loadModules();
    for (const [name, config] of wanted) {
      if (current.has(name)) continue;
      const server = new this.#mod!.McpServer(agent, config, this.#o.log, this.#o.env);
      current.set(name, server);
      server.start();
      started.push(name);
    }
    if (current.size) this.#agents.set(agent, current);
    else this.#agents.delete(agent);
    if (started.length) this.#o.log.info({ agent, servers: started }, 'MCP servers starting');
    return started;
  }

  /** The tools an agent's connected servers offer now, as `server__tool` (or a name model APIs take: tool-names.ts). */
  tools(agent: string): Tool[] {
    const servers = this.#agents.get(agent);
    const mod = this.#mod;
    if (!servers || !mod) return [];
    return [...servers.values()].flatMap((s) => mod.mcpTools(s));
  }

  /**
   * Waits (at most `maxMs`, or until `signal` aborts) for the first connection attempt of
   * each of an agent's servers, so a turn right after start-up (a recovered one) is offered
   * the tools of servers that are still starting instead of running without them.
   */
  async ready(agent: string, maxMs: number, signal: AbortSignal): Promise<void> {
    const servers = [...(this.#agents.get(agent)?.values() ?? [])];
    if (servers.length === 0 || signal.aborted) return;
    await settleWithin(raceAbort(Promise.all(servers.map((s) => s.firstAttempt)), signal), maxMs);
  }

  status(): McpServerStatus[] {
    return [...this.#agents.values()].flatMap((m) => [...m.values()].map((s) => s.status()));
  }

  async stopAll(): Promise<void> {
    const all = [...this.#agents.keys()];
    await Promise.all(all.map((a) => this.sync(a, [])));
  }
}
