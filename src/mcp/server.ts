import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, McpError, ToolListChangedNotificationSchema, type CallToolResult, type Tool as McpTool } from '@modelcontextprotocol/sdk/types.js';
import { backoffSchema, type BackoffConfig, type McpServerConfig } from '../config/schema.js';
import { ChannelError, CodedError, errorMessage } from '../contracts/errors.js';
import type { Logger } from '../observe/logger.js';
import { SupervisedChannel, type ChannelStatus } from '../supervisor/channel.js';
import { settleWithin } from '../util/abortable.js';
import { VERSION } from '../util/version.js';
import { ANSWER_TOO_LARGE, boundedMcpFetch } from './http-bound.js';
import { listToolsBounded } from './list-tools.js';
import { lostSessionStatus, type LostSessionStatus } from './lost-session.js';
import { throttleStdio } from './stdio-buffer.js';
import { modelToolNames, toolName } from './tool-names.js';

/** What /status shows for one MCP server. */
export interface McpServerStatus {
  agent: string;
  name: string;
  transport: 'stdio' | 'http';
  state: ChannelStatus['state'];
  since: string;
  attempts: number;
  next_retry_at: string | null;
  last_error: ChannelStatus['last_error'];
  /** Increases on every new connection (a restart after the server died counts). */
  connection: number;
  /** Tools offered to the model (after the `tools` allowlist); 0 while not connected. */
  tools: number;
  /** The stdio server's process id while it runs. */
  pid: number | null;
}

/** One tool offered to the model: the name the model sees and calls, and the server's tool. */
export interface OfferedTool {
  name: string;
  tool: McpTool;
}

export interface CallOptions {
  signal: AbortSignal;
  timeoutMs: number;
  onProgress?: (progress: number, total: number | undefined, message: string | undefined) => void;
}

/** MCP servers restart like channels do, from a short first delay (they are local processes). */
const MCP_BACKOFF: BackoffConfig = backoffSchema.parse({ initial_ms: 500, max_ms: 30000 });
const CONNECT_TIMEOUT_MS = 30000;
/** A server's notifications/tools/list_changed are answered with one tools/list this long after the last of a burst. */
export const TOOLS_RELIST_DEBOUNCE_MS = 300;

/**
 * One configured MCP server: an official SDK client over stdio or Streamable HTTP, run as a
 * supervised listener (the channels' SupervisedChannel: full-jitter backoff, `/status` state).
 * A connection lists the server's tools; when the server dies the tools disappear until the
 * next connection lists them again, and so does the server's notifications/tools/list_changed
 * (the next turn is offered what it lists then). A Streamable HTTP session the server no
 * longer knows (it restarted, or the session expired) is replaced by a new one within the
 * same connection, as the MCP spec requires of a client; the SDK alone would keep sending the
 * dead session id. The spec's answer to such a session is HTTP 404; a 400 whose text names
 * the session counts too (lostSessionStatus: servers built on the SDKs' older examples).
 */
export class McpServer {
  readonly agent: string;
  readonly config: McpServerConfig;
  readonly #log: Logger;
  readonly #env: NodeJS.ProcessEnv;
  readonly #supervised: SupervisedChannel;
  #client: Client | undefined;
  #transport: Transport | undefined;
  #tools: McpTool[] = [];
  /** Ends the current connection so the supervisor starts a new one. */
  #drop: ((err: Error) => void) | undefined;
  /** The current connection's stop signal and its supervisor's "connected" (a new session counts as a connection). */
  #connection: { signal: AbortSignal; onConnected: () => void } | undefined;
  /** The session being (or last) replaced, and its replacement: calls that meet the same lost session share it. */
  #renewal: { stale: Client; fresh: Promise<Client> } | undefined;
  /** The pending tools/list after a list_changed, and the latest listing started (an older one that ends later is not kept). */
  #relistTimer: NodeJS.Timeout | undefined;
  #relists = 0;
  /** The offered tools with their model names, for the listing they were made from; renamings logged so far. */
  #named: { listed: readonly McpTool[]; offered: readonly OfferedTool[] } | undefined;
  readonly #renamesLogged = new Set<string>();

  constructor(agent: string, config: McpServerConfig, log: Logger, env: NodeJS.ProcessEnv) {
    this.agent = agent;
    this.config = config;
    this.#env = env;
    this.#log = log.child({ agent, mcp: config.name });
    this.#supervised = new SupervisedChannel({
      id: `mcp:${agent}/${config.name}`,
      kind: 'mcp',
      adapter: { listen: (_deliver, signal, onConnected) => this.#listen(signal, onConnected) },
      deliver: async () => false,
      backoff: MCP_BACKOFF,
      connectTimeoutMs: CONNECT_TIMEOUT_MS,
      log: this.#log,
    });
  }

  start(): void {
    this.#supervised.start();
  }

  /** Settles once the first connection attempt has (connected, or failed and is backing off). */
  get firstAttempt(): Promise<void> {
    return this.#supervised.firstAttempt;
  }

  /** Closes the client (a stdio server's process ends with it). */
  async stop(graceMs: number): Promise<void> {
    await this.#supervised.stop(graceMs);
  }

  /** The tools of the current connection, filtered by the `tools` allowlist. */
  get tools(): readonly McpTool[] {
    if (!this.#client) return [];
    const allow = this.config.tools;
    return allow ? this.#tools.filter((t) => allow.includes(t.name)) : this.#tools;
  }

  /** The tools offered to the model, each with the name it sees (modelToolNames): renamings are logged once. */
  get offered(): readonly OfferedTool[] {
    if (this.#named?.listed === this.#tools) return this.#named.offered;
    const tools = this.tools;
    const names = modelToolNames(
      this.config.name,
      tools.map((t) => t.name),
    );
    const offered = tools.map((tool) => ({ name: names.get(tool.name)!, tool }));
    this.#named = { listed: this.#tools, offered };
    const renamed = offered.filter((o) => o.name !== toolName(this.config.name, o.tool.name) && !this.#renamesLogged.has(`${o.tool.name}\n${o.name}`));
    for (const o of renamed) this.#renamesLogged.add(`${o.tool.name}\n${o.name}`);
    if (renamed.length)
      this.#log.info(
        { renamed: Object.fromEntries(renamed.map((o) => [o.tool.name, o.name])) },
        `MCP server ${this.config.name}: tools whose names model APIs refuse are offered under other names`,
      );
    return offered;
  }

  status(): McpServerStatus {
    const s = this.#supervised.status();
    const pid = this.#transport instanceof StdioClientTransport ? this.#transport.pid : null;
    return {
      agent: this.agent,
      name: this.config.name,
      transport: this.config.command !== undefined ? 'stdio' : 'http',
      state: s.state,
      since: s.since,
      attempts: s.attempts,
      next_retry_at: s.next_retry_at,
      last_error: s.last_error,
      connection: s.connection,
      tools: s.state === 'connected' ? this.tools.length : 0,
      pid: s.state === 'connected' ? pid : null,
    };
  }

  /**
   * Calls one tool. The signal cancels the request with MCP's `notifications/cancelled`;
   * `timeoutMs` ends it (also cancelled) with MCP_TOOL_TIMEOUT.
   */
  async call(tool: string, args: Record<string, unknown>, o: CallOptions): Promise<CallToolResult> {
    const client = this.#client;
    if (!client) throw new CodedError('MCP_UNAVAILABLE', `MCP server "${this.config.name}" is not connected`);
    const deadline = Date.now() + o.timeoutMs;
    const hadSession = this.#transport instanceof StreamableHTTPClientTransport && this.#transport.sessionId !== undefined;
    try {
      return await this.#callOn(client, tool, args, o, o.timeoutMs);
    } catch (err) {
      // A request that carried a session id refused for that session (404, or a 400 naming it):
      // the server ran nothing. Once on a new session; a second refusal is the server's to explain.
      const lost = hadSession ? lostSessionStatus(err) : undefined;
      if (lost === undefined || o.signal.aborted) throw this.#callError(err, tool, o);
      const fresh = this.#renew(client, lost);
      if (!(await settleWithin(fresh, deadline - Date.now(), o.signal))) {
        if (o.signal.aborted) throw o.signal.reason ?? err;
        throw new CodedError('MCP_TOOL_TIMEOUT', `${this.config.name}__${tool} did not answer within ${o.timeoutMs} ms (a new session was being started)`);
      }
      try {
        return await this.#callOn(await fresh, tool, args, o, Math.max(1, deadline - Date.now()));
      } catch (again) {
        throw this.#callError(again, tool, o);
      }
    }
  }

  async #callOn(client: Client, tool: string, args: Record<string, unknown>, o: CallOptions, timeoutMs: number): Promise<CallToolResult> {
    const result = await client.callTool({ name: tool, arguments: args }, undefined, {
      signal: o.signal,
      timeout: timeoutMs,
      ...(o.onProgress ? { onprogress: (p) => o.onProgress!(p.progress, p.total, p.message) } : {}),
    });
    return result as CallToolResult;
  }

  /** A failed call as the model is told it (coded); a connection that is gone is ended, so the supervisor starts another. */
  #callError(err: unknown, tool: string, o: CallOptions): unknown {
    if (o.signal.aborted) return o.signal.reason ?? err;
    if (err instanceof CodedError) return err;
    if (err instanceof McpError && err.code === ErrorCode.RequestTimeout)
      return new CodedError('MCP_TOOL_TIMEOUT', `${this.config.name}__${tool} did not answer within ${o.timeoutMs} ms`, { cause: err });
    if (err instanceof McpError && err.code === ErrorCode.ConnectionClosed) {
      this.#drop?.(err);
      return new CodedError('MCP_UNAVAILABLE', `MCP server "${this.config.name}" went away during the call`, { cause: err });
    }
    if (err instanceof McpError && err.code === ANSWER_TOO_LARGE)
      return new CodedError('MCP_ANSWER_TOO_LARGE', `${this.config.name}__${tool}: ${err.message.replace(/^MCP error -?\d+: /, '')}`, { cause: err });
    // Streamable HTTP has no connection to lose: a refused request means the server is gone.
    if (err instanceof TypeError) this.#drop?.(err);
    return new CodedError('MCP_TOOL_FAILED', `${this.config.name}__${tool}: ${errorMessage(err)}`, { cause: err });
  }

  /**
   * A new session in place of `stale` (initialize, tools listed again): one however many calls
   * met its loss (`status` is the first one's, for the log). When it cannot be started the
   * connection ends and the supervisor retries.
   */
  #renew(stale: Client, status: LostSessionStatus): Promise<Client> {
    if (this.#renewal?.stale === stale) return this.#renewal.fresh;
    const connection = this.#connection;
    if (!connection || this.#client !== stale) return Promise.reject(new CodedError('MCP_UNAVAILABLE', `MCP server "${this.config.name}" is not connected`));
    this.#log.warn({ status }, `MCP server ${this.config.name} no longer knows the session (HTTP ${status}); starting a new one`);
    const fresh = this.#open(connection.signal).then(
      (client) => {
        stale.onclose = undefined;
        void stale.close().catch(() => {});
        connection.onConnected();
        return client;
      },
      (err: unknown) => {
        const why = new ChannelError('MCP_UNAVAILABLE', `MCP server "${this.config.name}": a new session failed: ${errorMessage(err)}`, {
          cause: err,
          retryable: true,
        });
        this.#drop?.(why);
        throw why;
      },
    );
    fresh.catch(() => {});
    this.#renewal = { stale, fresh };
    return fresh;
  }

  #makeTransport(): Transport {
    const c = this.config;
    if (c.command !== undefined) {
      const transport = new StdioClientTransport({ command: c.command, args: c.args, env: { ...getDefaultEnvironment(), ...c.env }, stderr: 'pipe' });
      throttleStdio(transport);
      transport.stderr?.on('data', (d: Buffer) => this.#log.debug({ stderr: String(d).trimEnd() }, 'MCP server stderr'));
      return transport;
    }
    const headers: Record<string, string> = {};
    for (const [header, envName] of Object.entries(c.headers_env)) {
      const value = this.#env[envName];
      if (value === undefined)
        throw new ChannelError('MCP_UNAVAILABLE', `headers_env.${header}: environment variable ${envName} is not set`, { retryable: false });
      headers[header] = value;
    }
    // Its answers bounded as stdio's messages are: the SDK would read a 1 GB answer whole.
    return new StreamableHTTPClientTransport(new URL(c.url!), { requestInit: { headers }, fetch: boundedMcpFetch() });
  }

  /** One session: a new client and transport, connected and its tools listed; it becomes the current one. */
  async #open(signal: AbortSignal): Promise<Client> {
    const client = new Client({ name: 'channeld', version: VERSION });
    const transport = this.#makeTransport();
    client.onerror = (err) => this.#log.debug({ err }, 'MCP transport error');
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      clearTimeout(this.#relistTimer);
      this.#relistTimer = setTimeout(() => void this.#relist(client), TOOLS_RELIST_DEBOUNCE_MS);
    });
    // Only the current session's end ends the connection (a replaced one is closed on purpose).
    client.onclose = () => {
      if (this.#client === client) this.#drop?.(new ChannelError('MCP_UNAVAILABLE', `MCP server "${this.config.name}" closed the connection`));
    };
    try {
      await client.connect(transport, { signal });
      const tools = await listToolsBounded(client, { server: this.config.name, maxTools: this.config.max_tools, signal });
      // The connection ended meanwhile: nobody would close this client.
      if (this.#connection?.signal !== signal) throw new Error('the connection ended');
      this.#client = client;
      this.#transport = transport;
      this.#tools = tools;
      return client;
    } catch (err) {
      client.onclose = undefined;
      await client.close().catch(() => {});
      throw err;
    }
  }

  /**
   * Lists the tools again after the server said they changed. A listing past a bound ends the
   * connection with its fatal error, as at connect; any other failure keeps the tools listed before.
   */
  async #relist(client: Client): Promise<void> {
    this.#relistTimer = undefined;
    const connection = this.#connection;
    if (this.#client !== client || !connection) return;
    const relist = ++this.#relists;
    try {
      const tools = await listToolsBounded(client, { server: this.config.name, maxTools: this.config.max_tools, signal: connection.signal });
      if (this.#client !== client || relist !== this.#relists) return;
      this.#tools = tools;
      this.#log.info({ tools: this.tools.length }, `MCP server ${this.config.name} changed its tools`);
    } catch (err) {
      if (connection.signal.aborted || this.#client !== client) return;
      if (err instanceof CodedError && !err.retryable) this.#drop?.(err);
      else this.#log.warn({ err }, `MCP server ${this.config.name} said its tools changed, but listing them failed; the earlier list stays`);
    }
  }

  /** An `approval` list naming a tool the server does not list gates nothing: a typo, or a model name (`server__tool`) for an MCP one. */
  #warnUnlistedApprovals(): void {
    const approval = this.config.approval;
    const unlisted = Array.isArray(approval) ? approval.filter((name) => !this.#tools.some((t) => t.name === name)) : [];
    if (unlisted.length)
      this.#log.warn(
        { unlisted },
        `MCP server ${this.config.name}: approval names tools the server does not list, so they gate nothing: ${unlisted.join(', ')}`,
      );
  }

  /** One connection: lasts until the server goes away (retryable) or `signal` aborts (clean). */
  async #listen(signal: AbortSignal, onConnected: () => void): Promise<void> {
    const ended = new Promise<Error>((resolve) => {
      this.#drop = resolve;
      signal.addEventListener('abort', () => resolve(new Error('stopped')), { once: true });
    });
    this.#connection = { signal, onConnected };
    try {
      await this.#open(signal);
      this.#log.info({ tools: this.tools.length }, `MCP server ${this.config.name} connected`);
      this.#warnUnlistedApprovals();
      onConnected();
      const why = await ended;
      if (!signal.aborted) throw why;
    } catch (err) {
      if (signal.aborted) return;
      throw err instanceof CodedError
        ? err
        : new ChannelError('MCP_UNAVAILABLE', `MCP server "${this.config.name}": ${errorMessage(err)}`, { cause: err, retryable: true });
    } finally {
      const client = this.#client;
      this.#client = undefined;
      this.#drop = undefined;
      this.#connection = undefined;
      this.#renewal = undefined;
      clearTimeout(this.#relistTimer);
      this.#relistTimer = undefined;
      this.#tools = [];
      if (client) {
        client.onclose = undefined;
        await client.close().catch(() => {});
      }
      this.#transport = undefined;
    }
  }
}
