import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, McpError, type CallToolResult, type Tool as McpTool } from '@modelcontextprotocol/sdk/types.js';
import { backoffSchema, type BackoffConfig, type McpServerConfig } from '../config/schema.js';
import { ChannelError, CodedError, errorMessage } from '../contracts/errors.js';
import type { Logger } from '../observe/logger.js';
import { SupervisedChannel, type ChannelStatus } from '../supervisor/channel.js';
import { VERSION } from '../util/version.js';
import { listToolsBounded } from './list-tools.js';
import { throttleStdio } from './stdio-buffer.js';

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

export interface CallOptions {
  signal: AbortSignal;
  timeoutMs: number;
  onProgress?: (progress: number, total: number | undefined, message: string | undefined) => void;
}

/** MCP servers restart like channels do, from a short first delay (they are local processes). */
const MCP_BACKOFF: BackoffConfig = backoffSchema.parse({ initial_ms: 500, max_ms: 30000 });
const CONNECT_TIMEOUT_MS = 30000;

/**
 * One configured MCP server: an official SDK client over stdio or Streamable HTTP, run as a
 * supervised listener (the channels' SupervisedChannel: full-jitter backoff, `/status` state).
 * A connection lists the server's tools; when the server dies the tools disappear until the
 * next connection lists them again.
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
    try {
      const result = await client.callTool({ name: tool, arguments: args }, undefined, {
        signal: o.signal,
        timeout: o.timeoutMs,
        ...(o.onProgress ? { onprogress: (p) => o.onProgress!(p.progress, p.total, p.message) } : {}),
      });
      return result as CallToolResult;
    } catch (err) {
      if (o.signal.aborted) throw o.signal.reason ?? err;
      if (err instanceof McpError && err.code === ErrorCode.RequestTimeout)
        throw new CodedError('MCP_TOOL_TIMEOUT', `${this.config.name}__${tool} did not answer within ${o.timeoutMs} ms`, { cause: err });
      if (err instanceof McpError && err.code === ErrorCode.ConnectionClosed) {
        this.#drop?.(err);
        throw new CodedError('MCP_UNAVAILABLE', `MCP server "${this.config.name}" went away during the call`, { cause: err });
      }
      // Streamable HTTP has no connection to lose: a refused request means the server is gone.
      if (err instanceof TypeError) this.#drop?.(err);
      throw new CodedError('MCP_TOOL_FAILED', `${this.config.name}__${tool}: ${errorMessage(err)}`, { cause: err });
    }
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
    return new StreamableHTTPClientTransport(new URL(c.url!), { requestInit: { headers } });
  }

  /** One connection: lasts until the server goes away (retryable) or `signal` aborts (clean). */
  async #listen(signal: AbortSignal, onConnected: () => void): Promise<void> {
    const client = new Client({ name: 'channeld', version: VERSION });
    const transport = this.#makeTransport();
    const ended = new Promise<Error>((resolve) => {
      this.#drop = resolve;
      client.onclose = () => resolve(new ChannelError('MCP_UNAVAILABLE', `MCP server "${this.config.name}" closed the connection`));
      signal.addEventListener('abort', () => resolve(new Error('stopped')), { once: true });
    });
    client.onerror = (err) => this.#log.debug({ err }, 'MCP transport error');
    this.#transport = transport;
    try {
      await client.connect(transport, { signal });
      this.#tools = await listToolsBounded(client, { server: this.config.name, maxTools: this.config.max_tools, signal });
      this.#client = client;
      this.#log.info({ tools: this.tools.length }, `MCP server ${this.config.name} connected`);
      onConnected();
      const why = await ended;
      if (!signal.aborted) throw why;
    } catch (err) {
      if (signal.aborted) return;
      throw err instanceof CodedError
        ? err
        : new ChannelError('MCP_UNAVAILABLE', `MCP server "${this.config.name}": ${errorMessage(err)}`, { cause: err, retryable: true });
    } finally {
      this.#client = undefined;
      this.#drop = undefined;
      this.#tools = [];
      client.onclose = undefined;
      await client.close().catch(() => {});
      this.#transport = undefined;
    }
  }
}
