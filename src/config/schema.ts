import { z } from 'zod';
import { secretRef } from '../contracts/secret-ref.js';
import { listenProblem } from './listen.js';
import { providerNames, providerRules } from './providers.js';
import { schedulesSchema } from './schedules.js';

/**
 * The whole daemon.config.toml schema (shared/CONFIG.md). Strict everywhere: unknown keys
 * are errors. Secrets are references only: each secret `X` is `X_env`, `X_file` or
 * `X_credential`.
 */

/**
 * Every duration is at most a day: Node turns timer values of 2^31 ms or more into 1 ms,
 * so a too-big value would act as "at once" instead of "practically never".
 */
export const MAX_DURATION_MS = 86_400_000;
const durationMs = z.number().int().nonnegative().max(MAX_DURATION_MS);
// min(1), not positive(): the refusal then says "at least 1", not "more than 0".
const positiveDurationMs = z.number().int().min(1).max(MAX_DURATION_MS);
const positiveInt = z.number().int().min(1);
/** Per-person and per-channel quotas (src/quotas): `[limits]`, an agent and a channel may each set them; the most specific wins. */
const quotaShape = {
  /** Turns one sender may start per UTC hour in a channel; the channel's `admins` are exempt. */
  user_turns_per_hour: z.number().int().min(1).optional(),
  /** Spend (in the `[models]` prices' currency) one sender may cause per UTC day in a channel. */
  user_cost_per_day: z.number().positive().optional(),
  /** Spend one channel may cause per UTC day, all its senders together. */
  channel_cost_per_day: z.number().positive().optional(),
};
/** A price per million tokens past this is a typo (and 1e308 would make every cost Infinity). */
export const MAX_PRICE_PER_MTOK = 10_000;

export { secretKinds } from '../contracts/secret-ref.js';

/**
 * Secret base names of the core's sections, so inline values (`admin_token = "..."`) get a
 * precise refusal; each channel kind adds its own (ChannelKinds.secretBases).
 */
export const coreSecretBases = ['admin_token', 'api_key', 'nats_url', 'postgres_url'] as const;

const queueMode = z.enum(['followup', 'interrupt', 'collect']);

export const backoffSchema = z.strictObject({
  initial_ms: durationMs.default(1000),
  factor: z.number().min(1).default(2),
  max_ms: durationMs.default(60000),
  stable_ms: durationMs.default(300000),
});

/** The keys every channel has, whatever its kind; ChannelKinds merges each kind's own keys in. */
export const channelCommonShape = {
  id: z.string().regex(/^[A-Za-z0-9_-]+$/, 'use letters, digits, "_" and "-" only'),
  enabled: z.boolean().default(true),
  agent: z.string().min(1).optional(),
  allow_from: z.array(z.string().min(1)).optional(),
  allow_bots: z.boolean().default(false),
  /** Sender ids whose /stop stops anyone's answer, who may `/stop all`, and whom quotas never refuse. */
  admins: z.array(z.string().min(1)).default([]),
  ...quotaShape,
  /** A reaction put on each stored message until its turn ends (kinds whose adapter can react); off when unset. */
  ack_reaction: z.string().min(1).optional(),
  /** Groups: `mention` answers when addressed; `classifier` also asks `intent_model` about unaddressed messages. */
  reply_intent: z.enum(['mention', 'classifier']).default('mention'),
  /** The small model that judges reply/ignore, on the channel's agent's endpoint; the agent's model when unset. */
  intent_model: z.string().min(1).optional(),
  require_mention: z.boolean().default(true),
  scope: z.enum(['chat', 'sender']).default('chat'),
  max_in_flight: positiveInt.optional(),
  queue_mode: queueMode.optional(),
  stream_mode: z.enum(['partial', 'final']).default('partial'),
  edit_interval_ms: durationMs.optional(),
  show_tool_progress: z.boolean().default(true),
  connect_timeout_ms: positiveDurationMs.default(30000),
  backoff: backoffSchema.prefault({}),
  /** `/word` naming no command: `reply` "unknown command, see /help", or `agent` (free-form slash text goes to the model). */
  unknown_commands: z.enum(['reply', 'agent']).default('reply'),
};

/**
 * A channel as the core sees it: the common keys and its `type`. The parsed object also
 * holds its kind's own keys (ChannelKinds builds the schema that checks them), which only
 * the kind's own code reads.
 */
const channelCommon = z.object({ ...channelCommonShape, type: z.string() });

/**
 * One MCP server of an agent (`[[agents.NAME.mcp]]`): stdio (`command`, `args`, `env`) or
 * Streamable HTTP (`url`, `headers_env` naming the environment variables that hold header
 * values, e.g. `{ Authorization = "MCP_TOKEN" }`).
 */
export const mcpServerSchema = z
  .strictObject({
    name: z
      .string()
      .regex(/^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$/, 'use letters, digits, "-" and single "_" only ("__" separates server and tool)')
      .max(32),
    command: z.string().min(1).optional(),
    args: z.array(z.string()).default([]),
    env: z.record(z.string(), z.string()).default({}),
    url: z.url({ protocol: /^https?$/, error: 'write an http:// or https:// URL' }).optional(),
    headers_env: z.record(z.string(), z.string().min(1)).default({}),
    /** Only these tools of the server are offered; all when absent. */
    tools: z.array(z.string().min(1)).optional(),
    approval: z.union([z.enum(['never', 'always']), z.array(z.string().min(1))]).default('never'),
    timeout_ms: positiveDurationMs.default(60000),
    /** Tools this server may list (before the `tools` allowlist); past it the server is `failed` (MCP_TOO_MANY_TOOLS). */
    max_tools: positiveInt.max(10000).default(128),
  })
  .superRefine((s, ctx) => {
    if ((s.command === undefined) === (s.url === undefined))
      ctx.addIssue({
        code: 'custom',
        path: s.command === undefined ? ['command'] : ['url'],
        message: 'give either command (stdio) or url (Streamable HTTP), not both or neither',
      });
  });

export const agentSchema = z.strictObject({
  enabled: z.boolean().default(true),
  /** One of src/config/providers.ts, read when the config is parsed (not frozen into an enum). */
  provider: z
    .custom<string>()
    .superRefine((v, ctx) => {
      if (typeof v !== 'string' || !providerRules(v)) ctx.addIssue({ code: 'invalid_value', values: providerNames(), input: v });
    })
    .default('echo'),
  echo_delay_ms: durationMs.default(60),
  base_url: z.url().optional(),
  model: z.string().min(1).optional(),
  models: z.array(z.string().min(1)).default([]),
  api_key_env: z.string().min(1).optional(),
  temperature: z.number().min(0).max(2).optional(),
  max_output_tokens: positiveInt.default(2048),
  request_timeout_ms: positiveDurationMs.default(120000),
  max_steps: positiveInt.default(8),
  history_budget_chars: positiveInt.default(24000),
  system_prompt: z.string().default('You are a helpful assistant.'),
  time_zone: z.string().default('UTC'),
  tools: z.array(z.string().min(1)).optional(),
  /**
   * Tools whose calls ask in the chat first: a list of names (each asks), or a table
   * `{ NAME = "always" | "never" }` that overrides a tool's own default either way.
   */
  tool_approval: z.union([z.array(z.string().min(1)), z.record(z.string().min(1), z.enum(['always', 'never']))]).optional(),
  /** The operator declares the daemon's tools run confined (container, VM): `requires_sandbox` tools are offered. */
  sandbox: z.boolean().default(false),
  /** A tool call still running after this goes on in the background; its result comes as a follow-up turn. Unset: never. */
  background_after_ms: positiveDurationMs.optional(),
  /** Tool calls one conversation may have in the background at once; past it a call keeps its turn waiting. */
  max_background_calls: positiveInt.max(32).default(4),
  /** Modes on by default in every conversation (`/mode NAME` switches one per conversation). */
  modes: z.array(z.string().min(1)).default([]),
  /** What this agent's workspace has: a tool with `requires_features` is offered only when all are listed. */
  features: z.array(z.string().min(1)).default([]),
  fallback_models: z.array(z.string().regex(/^[a-z-]+:.+$/, 'write "provider:model"')).default([]),
  cooldown_ms: durationMs.default(30000),
  /** Running turns of this agent, across its channels. */
  max_in_flight: positiveInt.optional(),
  /** The agent's own folder; default `<state_dir>/agents/<name>`. */
  workspace_dir: z.string().min(1).optional(),
  /** Files in `workspace_dir` added to the system prompt after `system_prompt`, in order. */
  prompt_files: z.array(z.string().min(1)).default([]),
  /** A folder of Agent Skills (`NAME/SKILL.md`), relative to the config file: listed to the model, loaded with `load_skill`. */
  skills_dir: z.string().min(1).optional(),
  /** Spend per UTC day (in the currency of the `[models]` prices); past it new turns are refused. */
  daily_budget: z.number().positive().optional(),
  ...quotaShape,
  /** MCP servers whose tools the model is offered as `server__tool`. */
  mcp: z.array(mcpServerSchema).default([]),
  /** A tool result longer than this is cut, and the model is told so. */
  max_tool_result_chars: positiveInt.default(16000),
  /** Sender ids who may approve or deny any tool call of this agent (besides the turn's starter). */
  approvers: z.array(z.string().min(1)).default([]),
  /** An approval not decided within this long counts as denied. */
  approval_timeout_ms: positiveDurationMs.default(300000),
  /** Keep facts users ask to keep (/remember, the `remember` tool) and recall them in later turns. */
  memory: z.boolean().default(false),
  /** The most characters of the speaker's memories added to a turn's system prompt. */
  memory_max_chars: positiveInt.default(2000),
  /** A `[models."NAME"]` served at base_url's /embeddings: recall ranks memories by similarity (full-text when it fails). */
  memory_embedding_model: z.string().min(1).optional(),
  /** A `[models."NAME"]` with input = ["audio"], served at base_url's /audio/transcriptions: voice notes become text. */
  transcription_model: z.string().min(1).optional(),
  /** Voice notes longer than this are not transcribed (the size limit is [limits] max_attachment_bytes). */
  max_audio_duration_ms: positiveDurationMs.default(300000),
  /** Echo the transcript of a voice note at the top of the reply. */
  show_transcript: z.boolean().default(false),
  /** A `[models."NAME"]` served at base_url's /audio/speech: an answer to a voice note is also sent as a voice note. */
  speech_model: z.string().min(1).optional(),
  /** The voice `speech_model` speaks with (OpenAI's names: alloy, echo, fable, onyx, nova, shimmer, ...). */
  speech_voice: z.string().min(1).max(64).default('alloy'),
  /** Fetch up to 3 http(s) links of a message and add their readable text to the turn. */
  read_links: z.boolean().default(false),
});

/** What one model accepts and what it costs (`[models."NAME"]`). */
export const modelSchema = z.strictObject({
  input: z
    .array(z.enum(['text', 'image', 'audio']))
    .min(1)
    .default(['text']),
  price_in_per_mtok: z.number().nonnegative().max(MAX_PRICE_PER_MTOK).optional(),
  price_out_per_mtok: z.number().nonnegative().max(MAX_PRICE_PER_MTOK).optional(),
});

/**
 * Cluster mode (docs/CLUSTER.md): several instances share one NATS JetStream and one
 * PostgreSQL. Absent means the single-node daemon with SQLite.
 */
export const clusterSchema = z.strictObject({
  ...secretRef('nats_url'),
  ...secretRef('postgres_url'),
  /** This instance's name in leases and /status; hostname + pid when not given. */
  instance_id: z
    .string()
    .regex(/^[A-Za-z0-9_-]+$/, 'use letters, digits, "_" and "-" only')
    .optional(),
  /** Prefix of the stream, KV bucket and subjects: instances with the same namespace form one cluster. */
  namespace: z
    .string()
    .regex(/^[A-Za-z0-9_-]+$/, 'use letters, digits, "_" and "-" only')
    .default('channeld'),
  /** The PostgreSQL schema holding the shared state. */
  postgres_schema: z
    .string()
    .regex(/^[a-z_][a-z0-9_]*$/, 'use lower-case letters, digits and "_"')
    .default('channeld'),
  /** How long a lease lasts without renewal; owners renew every third of it. */
  lease_ttl_ms: positiveDurationMs.min(1000).default(5000),
  /** Partitions of the conversation space; each is consumed by one instance at a time. */
  partitions: positiveInt.max(1024).default(16),
  /** Messages waiting across the whole cluster; past it a sender gets the busy reply. */
  max_queued: positiveInt.default(10000),
});

const listenShape = /^(\[[0-9a-fA-F:.]+\]|[^:\s]+):\d{1,5}$/;
const listenAddress = z
  .string()
  .regex(listenShape, 'write "host:port", e.g. "127.0.0.1:8787"')
  .superRefine((v, ctx) => {
    const problem = listenShape.test(v) ? listenProblem(v) : undefined;
    if (problem) ctx.addIssue({ code: 'custom', message: problem, input: v });
  });

/**
 * The whole file's schema with `channel` as the schema of one `[[channels]]` table.
 * ChannelKinds builds the real one from the registered kinds; `configSchema` (channels
 * typed by their common keys only) gives the sections and the types.
 */
export function configSchemaWith<C extends z.ZodType>(channel: C) {
  return z.strictObject({
    daemon: z
      .strictObject({
        state_dir: z.string().min(1).default('./.channeld'),
        log_level: z.enum(['trace', 'debug', 'info', 'warn', 'error']).default('info'),
        shutdown_grace_ms: durationMs.default(10000),
        upgrade_timeout_ms: durationMs.default(60000),
        inbox_retention_hours: positiveInt.default(72),
        /** Plugin folders (relative to this file) whose index adds modes, tools, hooks and commands (src/contracts/plugin-folder.ts). */
        plugins: z.array(z.string().min(1)).default([]),
      })
      .prefault({}),
    http: z
      .strictObject({
        listen: listenAddress.default('127.0.0.1:8787'),
        admin_token_env: z.string().min(1).optional(),
        /** Host names (besides the listen host, localhost and loopback literals) requests may carry in `Host` and `Origin`. */
        allowed_hosts: z
          .array(z.string().regex(/^[A-Za-z0-9.-]+$|^\[[0-9A-Fa-f:.]+\]$/, 'write a host name or address without scheme or port, e.g. "chat.example.com"'))
          .default([]),
        /** What /readyz (and the /admin header) call ready: the HTTP server and storage only, or also some or every channel connected. */
        ready_requires: z.enum(['http', 'any_channel', 'all_channels']).default('http'),
      })
      .prefault({}),
    limits: z
      .strictObject({
        max_in_flight: positiveInt.default(32),
        max_queued: positiveInt.default(256),
        queue_mode: queueMode.default('followup'),
        collect_debounce_ms: durationMs.default(500),
        /** Attachments larger than this are not downloaded. */
        max_attachment_bytes: positiveInt.default(10 * 1024 * 1024),
        /** One attachment download may take this long; past it (or stalled) the turn goes on without the file. */
        attachment_timeout_ms: positiveDurationMs.default(30000),
        /** Group conversations whose unaddressed messages are kept as context (least recently active evicted first). */
        passive_max_conversations: positiveInt.default(1000),
        /** Bytes of text all that kept context may hold together. */
        passive_max_bytes: positiveInt.default(8 * 1024 * 1024),
        /** Per channel: messages held in memory while the store cannot take writes; past it a message is refused ("not kept"). */
        degraded_hold_messages: positiveInt.default(1000),
        /** Per channel: bytes (the messages as stored) that hold may keep. */
        degraded_hold_bytes: positiveInt.default(8 * 1024 * 1024),
        ...quotaShape,
      })
      .prefault({}),
    /** Traces (docs/OPERATIONS.md "Tracing"): off unless `otlp_endpoint` is set; a change needs a restart. */
    observe: z
      .strictObject({
        /** The collector's OTLP/HTTP base URL, e.g. "http://127.0.0.1:4318" (spans go to its /v1/traces). */
        otlp_endpoint: z.url({ protocol: /^https?$/, error: 'write an http:// or https:// URL, e.g. "http://127.0.0.1:4318"' }).optional(),
        /** `service.name` of the exported spans. */
        service_name: z.string().min(1).max(128).default('channeld'),
        /** The share of new messages traced (0 to 1); a message traced on one instance stays traced on the others. */
        sample_ratio: z.number().min(0).max(1).default(1),
      })
      .prefault({}),
    agent: agentSchema.optional(),
    agents: z.record(z.string().regex(/^[A-Za-z0-9_-]+$/), agentSchema).default({}),
    channels: z.array(channel).default([]),
    /** Per model name: its input kinds and prices. */
    models: z.record(z.string().min(1), modelSchema).default({}),
    cluster: clusterSchema.optional(),
    /** Agent turns on a cron schedule (src/config/schedules.ts). */
    schedules: schedulesSchema.default([]),
  });
}

/** The sections' schemas (`configSchema.shape.daemon`, ...) and the config's type; never parses a file. */
export const configSchema = configSchemaWith(channelCommon);

export type DaemonConfig = z.output<typeof configSchema>;
export type ChannelConfig = z.output<typeof channelCommon>;
export type AgentConfig = z.output<typeof agentSchema>;
export type ModelConfig = z.output<typeof modelSchema>;
export type QueueMode = z.output<typeof queueMode>;
export type McpServerConfig = z.output<typeof mcpServerSchema>;
export type ClusterConfig = z.output<typeof clusterSchema>;
export type BackoffConfig = z.output<typeof backoffSchema>;
