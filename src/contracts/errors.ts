/**
 * The coded error catalogue. Every error channeld raises is declared here once, with a
 * stable `code`, whether it is worth retrying, and a message that says what to do: `text`
 * for the operator (logs, CLI, HTTP), `user` where the person in the chat reads something
 * else (see userMessage). One code per distinct failure. Callers branch on `code` or
 * `retryable`, never on message text.
 */
export const catalogue = {
  CONFIG_INVALID: { retryable: false, text: 'the configuration is invalid; fix the listed keys and run `channeld check`' },
  STATE_DIR_UNUSABLE: { retryable: false, text: 'daemon.state_dir must be a directory this user can create and write; fix the path or its permissions' },
  CHANNEL_KIND_INVALID: {
    retryable: false,
    text: 'the channel kinds handed to channeld do not fit together (two with one name, or a kind key that clashes with the common channel keys); fix the registry',
  },
  CONFIG_NOT_FOUND: { retryable: false, text: 'the configuration file cannot be read; pass --config with a readable path' },
  V8_FLAGS_INVALID: {
    retryable: false,
    text: 'CHANNELD_V8_FLAGS takes only --heap-growing-percent=N (0-200) and --expose-gc; fix the variable (the systemd unit sets it)',
  },
  KERNEL_MISSING_SERVICE: { retryable: false, text: 'a component injects a service that no component provides' },
  KERNEL_UNDECLARED_USE: { retryable: false, text: 'a component uses a service it does not list in `inject`' },
  KERNEL_DUPLICATE_PROVIDER: { retryable: false, text: 'two components provide the same service' },
  KERNEL_UNDECLARED_PROVIDE: { retryable: false, text: 'a component provides a service it does not list in `provides`' },
  KERNEL_PROVIDED_TWICE: { retryable: false, text: 'a component provides the same service twice; provide each service once' },
  KERNEL_DUPLICATE_COMPONENT: { retryable: false, text: 'two components share a name' },
  KERNEL_UNKNOWN_SERVICE: { retryable: false, text: 'a component injects or provides a name that is not a declared service' },
  PLUGIN_FOLDER_INVALID: {
    retryable: false,
    text: 'a folder in [daemon] plugins is missing, or its index does not default-export a valid plugin definition; fix the path or the export',
  },
  KERNEL_CYCLE: { retryable: false, text: 'components depend on each other in a cycle' },
  KERNEL_START_TIMEOUT: { retryable: false, text: 'a component did not finish starting in time' },
  KERNEL_START_FAILED: { retryable: false, text: 'a component failed to start' },
  HOOK_CYCLE: { retryable: false, text: 'hooks order each other in a cycle; remove one before/after' },
  HOOK_DUPLICATE: { retryable: false, text: 'two hooks share a name in one phase' },
  COMMAND_DUPLICATE: { retryable: false, text: 'two slash commands share a name or alias' },
  TOOL_DUPLICATE: { retryable: false, text: 'two tools share a name' },
  TOOL_RESULT_UNDELIVERED: {
    retryable: true,
    text: 'a tool call that went on in the background finished, but its result could not be stored as a follow-up turn; it was retried, then dropped',
  },
  PLUGIN_TOOL_TIMEOUT: {
    retryable: false,
    text: "a plugin folder's tool did not answer within its timeout_ms (default 60000); its signal was aborted, the model was told, and a later result is dropped",
  },
  MESSAGE_HOOK_TIMEOUT: { retryable: false, text: "a plugin's message hook did not finish within its timeout_ms; it was aborted" },
  INBOX_FULL: { retryable: true, text: 'the inbox is at its bound ([cluster] max_queued unanswered items); the message was not stored' },
  MESSAGE_HOOK_BUSY: { retryable: false, text: "a plugin's message hook had too many runs still going, so a message skipped it" },
  TOOL_CALL_INVALID: {
    retryable: false,
    text: 'the model sent arguments for a tool that could not be repaired, twice',
    user: 'The model could not form a valid tool call; try rephrasing, or a larger model.',
  },
  MODE_DUPLICATE: { retryable: false, text: 'two modes share a name' },
  ACTION_DUPLICATE: { retryable: false, text: 'two management actions share a name' },
  ACTION_INPUT_INVALID: { retryable: false, text: "the input does not fit the action's schema" },
  ACTION_NOT_FOUND: { retryable: false, text: 'what the action names does not exist' },
  CHANNEL_AUTH_FAILED: { retryable: false, text: 'the platform refused the credentials; check the token and restart or reload' },
  CHANNEL_CONFLICT: { retryable: false, text: 'another process is using this bot; stop it before starting this channel' },
  CHANNEL_FORBIDDEN: { retryable: false, text: 'the platform refused a permission this channel needs' },
  CHANNEL_CONNECT_TIMEOUT: { retryable: true, text: 'the platform did not answer the connect attempt in time' },
  CHANNEL_REQUEST_TIMEOUT: { retryable: true, text: 'the platform did not answer a request in time' },
  CHANNEL_NETWORK: { retryable: true, text: 'the platform could not be reached' },
  CHANNEL_RATE_LIMITED: { retryable: true, text: 'the platform asked us to slow down' },
  CHANNEL_UNAVAILABLE: { retryable: true, text: 'the platform answered with a server error' },
  BUILD_MODULE_MISSING: {
    retryable: false,
    text: 'a module of the running build cannot be found (an upgrade removed it, or a dependency is not installed); restart channeld, after `npm ci` if a package is missing',
  },
  CHANNEL_ENDED: { retryable: true, text: 'the listener stopped without being asked to' },
  CHANNEL_REQUEST_FAILED: { retryable: false, text: 'the platform refused the request' },
  CHANNEL_FORMAT_REFUSED: { retryable: true, text: 'the platform refused a message format; the reply is planned again in the format it accepts' },
  CHANNEL_PROGRESS_REFUSED: {
    retryable: true,
    text: "a native stream could not show a tool's progress beside the text (the platform refused it, or the message no longer streams); the reply shows it as a line in its text from then on",
  },
  CHANNEL_WINDOW_CLOSED: {
    retryable: false,
    text: "the platform refused the message because the user's customer-service window is closed (they have not written for too long, 24 hours on some platforms); it is not retried",
  },
  CHANNEL_KICKED: {
    retryable: false,
    text: 'an operator of a group chat (a channel, a room) kicked the bot; it is parked, not rejoined against their will: sort it out with them, then restart or reload',
  },
  CHANNEL_BANNED: {
    retryable: false,
    text: 'the bot is banned from a group chat or the server; it is parked: lift the ban or change the config, then restart or reload',
  },
  PROVIDER_TIMEOUT: { retryable: true, text: 'the model did not answer in time' },
  PROVIDER_UNAVAILABLE: { retryable: true, text: 'the model provider could not be reached', user: 'The model could not be reached.' },
  PROVIDER_FAILED: { retryable: true, text: 'the model provider answered with a server error', user: 'The model returned an error; try again.' },
  PROVIDER_RATE_LIMITED: {
    retryable: true,
    text: 'the model provider is rate limiting us',
    user: 'The model provider is rate limiting us; try again in a moment.',
  },
  PROVIDER_REFUSED: { retryable: false, text: 'the model provider refused the request' },
  ATTACHMENT_TOO_LARGE: { retryable: false, text: 'the attachment is larger than [limits] max_attachment_bytes, so it was not downloaded' },
  ATTACHMENT_UNAVAILABLE: { retryable: false, text: 'the attachment could not be downloaded from the platform' },
  ATTACHMENT_TIMEOUT: { retryable: false, text: 'the attachment download stalled or took longer than [limits] attachment_timeout_ms, so it was not read' },
  LINK_REFUSED: { retryable: false, text: 'the link was not read: it points to a loopback, private or otherwise local address' },
  LINK_NOT_PAGE: { retryable: false, text: 'the link was not read: it is not a web page or text' },
  EMBEDDING_FAILED: { retryable: false, text: 'the embedding model (`[agent] memory_embedding_model`) gave no vector; recall used full-text search' },
  SPEECH_FAILED: { retryable: false, text: 'the speech model (`[agent] speech_model`) did not turn the answer into audio; the text was sent' },
  TRANSCRIPTION_FAILED: { retryable: false, text: 'the transcription model (`[agent] transcription_model`) did not turn the audio into text' },
  PROVIDER_AUTH_FAILED: {
    retryable: false,
    text: 'the model provider refused the API key; check api_key_env',
    user: 'The model provider refused our API key; the operator needs to check it.',
  },
  MEMORY_EMPTY: { retryable: false, text: 'a memory to keep had no text', user: 'Tell me what to remember: /remember TEXT.' },
  MEMORY_TOO_LONG: {
    retryable: false,
    text: 'a memory to keep was longer than a memory may be',
    user: 'That is too long to remember; keep it under 500 characters.',
  },
  MEMORY_FULL: {
    retryable: false,
    text: 'the user already keeps as many memories as they may',
    user: 'I already keep 200 memories for you; /memory lists them and /forget ID removes one.',
  },
  TURN_FAILED: { retryable: false, text: 'the turn failed', user: 'Something went wrong while answering; please try again.' },
  AGENT_UNKNOWN_PROVIDER: {
    retryable: false,
    text: 'an agent names a model provider that has no runner (src/agent/providers.ts); it is refused, never answered by another provider',
  },
  AGENT_NO_ENDING: { retryable: false, text: 'the agent runner stopped without done, error or cancelled', user: 'The agent ended without an answer.' },
  ANSWER_REPEATING: { retryable: false, text: 'the answer looped and was stopped', user: 'The answer started repeating itself, so it was stopped.' },
  ANSWER_EMPTY: {
    retryable: false,
    text: 'the model ended its answer without any text (it ran out of steps or tokens, was filtered, or replied empty)',
    user: 'The model ended without an answer. Please try again, or rephrase the question.',
  },
  ANSWER_TOO_LONG: {
    retryable: false,
    text: 'the model kept writing past max_output_tokens (more than 16 characters a token of text, reasoning and tool input in one call, or one stream event without end), so the call was stopped',
    user: 'The answer was cut off because the model did not stop writing.',
  },
  STORAGE_UNAVAILABLE: {
    retryable: true,
    text: 'the database cannot take writes right now (disk full, locked by another process, or damaged); see storage in /status',
  },
  FIRING_EXPIRED: {
    retryable: true,
    text: 'a schedule or reminder firing waited for storage longer than a repeat of it is recognised, and was let go so it cannot run twice; a reminder fires again through its claim, a schedule at its next time',
  },
  INBOX_ILLEGAL_TRANSITION: {
    retryable: false,
    text: 'an inbox item was moved to a state its current state does not lead to; this is a bug in channeld, please report it',
  },
  STORAGE_TOO_NEW: { retryable: false, text: 'the database was written by a newer channeld; run that version, or move the state_dir aside to start afresh' },
  STORAGE_DAMAGED: {
    retryable: false,
    text: 'the database failed its integrity check; stop channeld, keep a copy of channeld.db, and recover it with `sqlite3 channeld.db ".recover"` or move it aside',
  },
  LISTEN_INVALID: { retryable: false, text: 'the HTTP server cannot bind [http] listen; use an address of this machine and a port you may use' },
  WEBHOOK_AUTH_UNDECLARED: {
    retryable: false,
    text: 'a route under /webhooks/ was registered without declaring how it authenticates requests; pass its auth (scheme and describe) to route()',
  },
  LISTEN_IN_USE: { retryable: false, text: 'stop that process or choose another port in [http] listen' },
  MCP_UNAVAILABLE: { retryable: true, text: 'the MCP server could not be started or reached, or it went away' },
  MCP_TOOL_TIMEOUT: { retryable: false, text: 'the MCP tool did not answer within its timeout_ms' },
  MCP_TOOL_FAILED: { retryable: false, text: 'the MCP tool call failed' },
  MCP_ANSWER_TOO_LARGE: { retryable: false, text: "the MCP server's answer passed the byte bound (4 MiB) and was not read further" },
  PROMPT_FILE_OUTSIDE: { retryable: false, text: "a prompt file resolves (through a symlink) to a path outside the agent's workspace_dir" },
  SKILL_INVALID: { retryable: false, text: 'a SKILL.md in skills_dir is missing or breaks the Agent Skills format; that skill is left out, the others load' },
  SKILL_NOT_FOUND: { retryable: false, text: 'the model asked load_skill for a skill that is not in skills_dir' },
  SKILL_FILE_NOT_FOUND: { retryable: false, text: "the model asked load_skill for a file the skill's folder does not have" },
  SKILL_FILE_OUTSIDE: { retryable: false, text: "the model asked load_skill for a file outside the skill's folder; only the skill's own files are read" },
  SKILL_FILE_TOO_LARGE: { retryable: false, text: 'the model asked load_skill for a file of the skill too large to read' },
  MCP_TOO_MANY_TOOLS: { retryable: false, text: 'the MCP server lists more tools than its max_tools; raise max_tools or narrow the server' },
  MCP_TOO_MANY_PAGES: { retryable: false, text: 'the MCP server kept answering tools/list with another page past the page bound' },
  MCP_TOOLS_TOO_LARGE: { retryable: false, text: "the MCP server's tool list is larger than the byte bound" },
  DAEMON_SHUTTING_DOWN: { retryable: false, text: 'the daemon is shutting down' },
  CHANNEL_STOPPING: { retryable: true, text: 'the channel is stopping (a reload removed or changed it); what it was doing is left for its next start' },
  CHANNEL_UNKNOWN: {
    retryable: true,
    text: 'the dispatcher has no channel with this id (a reload is replacing it); the platform should deliver the message again',
  },
  CHANNEL_NOT_RUNNING: { retryable: true, text: 'the channel is configured but not running (starting, restarting after a failure, or stopped)' },
  CHANNEL_BUILD_FAILED: { retryable: false, text: "the channel's adapter could not be built from its config; fix the channel's keys and reload" },
  COMPONENT_UNLOADING: { retryable: false, text: 'a component of the daemon is unloading (a reload or shutdown)' },
  MANAGEMENT_UNBOUND: { retryable: true, text: 'the daemon is not serving management actions yet (starting) or any more (stopping)' },
  UPGRADE_FAILED: {
    retryable: false,
    text: 'the new build did not start or become ready within [daemon] upgrade_timeout_ms; it was stopped and the running daemon carries on (its reason follows)',
  },
  UPGRADE_HANDED_OVER: { retryable: true, text: 'this listener was handed over to the new process of an upgrade' },
  UPGRADE_IN_PROGRESS: { retryable: true, text: 'an upgrade is already under way; wait for its outcome' },
  TURN_INTERRUPTED: { retryable: false, text: 'the turn was interrupted by a newer message in its conversation' },
  TURN_STOPPED: { retryable: false, text: 'the turn was stopped on request (/stop or the operator)' },
  REPLY_STOPPED_BY_USER: {
    retryable: false,
    text: "the user stopped the answer with the platform's own control (a Stop button); the platform takes no more of it, and the turn is stopped",
  },
  TOOL_CALL_CANCELLED: { retryable: false, text: 'the tool call was cancelled by the user (/stop tool); the turn goes on without its result' },
  TURN_ENDED: { retryable: false, text: 'the turn ended, so what waited on it (its reply stream, its typing indicator) stopped waiting' },
  SHARED_RECORD_INVALID: { retryable: false, text: "a channel's shared record (cluster mode) was refused: its name or its value is outside the bounds" },
  CLUSTER_UNAVAILABLE: { retryable: true, text: 'NATS or PostgreSQL could not be reached; check [cluster] nats_url and postgres_url' },
  CLUSTER_LEASE_LOST: { retryable: true, text: 'this instance lost its lease; another instance runs the work now' },
} as const satisfies Record<string, { retryable: boolean; text: string; user?: string }>;

export type ErrorCode = keyof typeof catalogue;

/** What the person in the chat reads for a failure: the catalogue's `user` text, else its `text` as a sentence. */
export function userText(code: ErrorCode): string {
  const entry: { text: string; user?: string } = catalogue[code];
  return entry.user ?? `${entry.text.charAt(0).toUpperCase()}${entry.text.slice(1)}.`;
}

/** The chat's text for any failure: a coded error's own, anything else the generic TURN_FAILED one. */
export function userMessage(err: unknown): string {
  return userText(err instanceof CodedError ? err.code : 'TURN_FAILED');
}

export interface CodedErrorOptions {
  cause?: unknown;
  /** Overrides the catalogue's default when the platform tells us better. */
  retryable?: boolean;
  /** Set when the platform answered 429 with a retry-after. */
  retryAfterMs?: number;
}

/** An error with a stable code from the catalogue. */
export class CodedError extends Error {
  readonly code: ErrorCode;
  readonly retryable: boolean;
  readonly retryAfterMs: number | undefined;

  constructor(code: ErrorCode, detail?: string, options: CodedErrorOptions = {}) {
    const base = catalogue[code].text;
    super(detail ? `${detail} (${base})` : base, { cause: options.cause });
    this.name = 'CodedError';
    this.code = code;
    this.retryable = options.retryable ?? catalogue[code].retryable;
    this.retryAfterMs = options.retryAfterMs;
  }
}

/** An error raised by a channel's listener or transport; `retryable` drives the supervisor. */
export class ChannelError extends CodedError {
  constructor(code: ErrorCode, detail?: string, options: CodedErrorOptions = {}) {
    super(code, detail, options);
    this.name = 'ChannelError';
  }
}

/**
 * A model provider's failure, classified (PROVIDER_*): what the provider answered, kept
 * apart from `message` so the log can show it scrubbed of keys.
 */
export class ProviderError extends CodedError {
  /** What went wrong, in our words (the message without the catalogue text). */
  readonly detail: string;
  /** The HTTP status the provider answered, if it answered. */
  readonly status: number | undefined;
  /** What the provider said (its JSON `error.message`, or the body's start); not yet scrubbed. */
  readonly providerMessage: string | undefined;

  constructor(code: ErrorCode, detail: string, options: CodedErrorOptions & { status?: number; providerMessage?: string } = {}) {
    super(code, detail, options);
    this.name = 'ProviderError';
    this.detail = detail;
    this.status = options.status;
    this.providerMessage = options.providerMessage;
  }
}

/** The config failed validation; `problems` holds one `file:line:col: path: message` line each. */
export class ConfigError extends CodedError {
  readonly problems: readonly string[];
  constructor(problems: readonly string[], options: CodedErrorOptions = {}) {
    super('CONFIG_INVALID', problems.join('\n'), options);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/**
 * Failures the operator must fix before a restart can help (sysexits EX_CONFIG, 78, which
 * systemd's RestartPreventExitStatus keeps from looping): the config, the listen address,
 * the state_dir and a database this build must not touch.
 */
const operatorCodes: ReadonlySet<ErrorCode> = new Set([
  'CONFIG_INVALID',
  'CONFIG_NOT_FOUND',
  'V8_FLAGS_INVALID',
  'LISTEN_INVALID',
  'LISTEN_IN_USE',
  'STATE_DIR_UNUSABLE',
  'STORAGE_TOO_NEW',
  'STORAGE_DAMAGED',
]);

/** The coded error at the root of `err`'s cause chain that the operator must fix, if any. */
export function operatorProblem(err: unknown): CodedError | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 10; e = e.cause, depth++) {
    if (e instanceof CodedError && operatorCodes.has(e.code)) return e;
  }
  return undefined;
}

/** Whether an unknown failure is worth retrying: coded errors say so; anything else is presumed transient. */
/** Whether `signal` was aborted with one of `codes` (the lanes abort a turn with a coded reason). */
export const abortedBy = (signal: AbortSignal, ...codes: ErrorCode[]): boolean =>
  signal.aborted && signal.reason instanceof CodedError && codes.includes(signal.reason.code);

export function isRetryable(err: unknown): boolean {
  return err instanceof CodedError ? err.retryable : true;
}

/** Refusals no retry within a turn changes: the bot may not write to this chat (or at all). */
const CHAT_REFUSALS: ReadonlySet<string> = new Set(['CHANNEL_FORBIDDEN', 'CHANNEL_AUTH_FAILED', 'CHANNEL_WINDOW_CLOSED', 'CHANNEL_KICKED', 'CHANNEL_BANNED']);

/** Whether `err` says the bot may not write to this chat now (a reply stops drafting at once). */
export function refusesChat(err: unknown): boolean {
  return err instanceof ChannelError && CHAT_REFUSALS.has(err.code);
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
