import { z } from 'zod';

/**
 * The whole daemon.config.toml schema (shared/CONFIG.md). Strict everywhere: unknown keys
 * are errors. Secrets are references only: each secret `X` is `X_env`, `X_file` or
 * `X_credential`.
 */

const durationMs = z.number().int().nonnegative();
const positiveInt = z.number().int().positive();

/** The three ways to name a secret; `resolveSecrets` reads them. */
export const secretKinds = ['env', 'file', 'credential'] as const;
function secretRef<const B extends string>(base: B) {
  return {
    [`${base}_env`]: z.string().min(1).optional(),
    [`${base}_file`]: z.string().min(1).optional(),
    [`${base}_credential`]: z.string().min(1).optional(),
  } as { [K in `${B}_${(typeof secretKinds)[number]}`]: z.ZodOptional<z.ZodString> };
}

/** Secret base names per section, so inline values (`token = "..."`) get a precise refusal. */
export const secretBases = ['token', 'webhook_secret', 'bot_token', 'app_token', 'signing_secret', 'access_token', 'admin_token', 'api_key'] as const;

const queueMode = z.enum(['followup', 'interrupt', 'collect']);

export const backoffSchema = z.strictObject({
  initial_ms: durationMs.default(1000),
  factor: z.number().min(1).default(2),
  max_ms: durationMs.default(60000),
  stable_ms: durationMs.default(300000),
});

const channelBase = {
  id: z.string().regex(/^[A-Za-z0-9_-]+$/, 'use letters, digits, "_" and "-" only'),
  enabled: z.boolean().default(true),
  agent: z.string().min(1).optional(),
  allow_from: z.array(z.string().min(1)).optional(),
  allow_bots: z.boolean().default(false),
  /** Sender ids whose /stop stops anyone's answer, and who may `/stop all`. */
  admins: z.array(z.string().min(1)).default([]),
  /** A reaction put on each stored message until its turn ends (Telegram, Discord, Slack); off when unset. */
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
  connect_timeout_ms: positiveInt.default(30000),
  backoff: backoffSchema.prefault({}),
};

const webchat = z.strictObject({
  ...channelBase,
  type: z.literal('webchat'),
  access_token_env: z.string().min(1).optional(),
  /** Tabs whose latest replies are kept for a reload (least recently used evicted first). */
  backlog_max_tabs: positiveInt.default(200),
  /** Bytes of reply text all those backlogs may hold together. */
  backlog_max_bytes: positiveInt.default(8 * 1024 * 1024),
});

const telegram = z.strictObject({
  ...channelBase,
  type: z.literal('telegram'),
  ...secretRef('token'),
  mode: z.enum(['polling', 'webhook']).default('polling'),
  api_root: z.url().default('https://api.telegram.org'),
  native_drafts: z.boolean().default(true),
  rich_messages: z.boolean().default(true),
  public_url: z.url().optional(),
  ...secretRef('webhook_secret'),
});

const discord = z.strictObject({
  ...channelBase,
  type: z.literal('discord'),
  ...secretRef('token'),
  rest_api: z.url().default('https://discord.com/api'),
  guilds: z.array(z.string().min(1)).default([]),
});

const slack = z.strictObject({
  ...channelBase,
  type: z.literal('slack'),
  ...secretRef('bot_token'),
  ...secretRef('app_token'),
  ...secretRef('signing_secret'),
  mode: z.enum(['socket', 'http']).default('socket'),
  api_url: z.url().default('https://slack.com/api/'),
  reply_in_thread: z.boolean().default(true),
  native_stream: z.boolean().default(true),
});

export const channelSchema = z.discriminatedUnion('type', [webchat, telegram, discord, slack]);
export const channelKinds = ['webchat', 'telegram', 'discord', 'slack'] as const;

export const agentSchema = z.strictObject({
  enabled: z.boolean().default(true),
  provider: z.enum(['echo', 'openai-compatible']).default('echo'),
  echo_delay_ms: durationMs.default(60),
  base_url: z.url().optional(),
  model: z.string().min(1).optional(),
  models: z.array(z.string().min(1)).default([]),
  api_key_env: z.string().min(1).optional(),
  temperature: z.number().min(0).max(2).optional(),
  max_output_tokens: positiveInt.default(2048),
  request_timeout_ms: positiveInt.default(120000),
  max_steps: positiveInt.default(8),
  history_budget_chars: positiveInt.default(24000),
  system_prompt: z.string().default('You are a helpful assistant.'),
  time_zone: z.string().default('UTC'),
  tools: z.array(z.string().min(1)).optional(),
  modes: z.array(z.string().min(1)).default([]),
  fallback_models: z.array(z.string().regex(/^[a-z-]+:.+$/, 'write "provider:model"')).default([]),
  cooldown_ms: durationMs.default(30000),
  /** Running turns of this agent, across its channels. */
  max_in_flight: positiveInt.optional(),
});

const listenAddress = z.string().regex(/^(\[[0-9a-fA-F:.]+\]|[^:\s]+):\d{1,5}$/, 'write "host:port", e.g. "127.0.0.1:8787"');

export const configSchema = z.strictObject({
  daemon: z
    .strictObject({
      state_dir: z.string().min(1).default('./.channeld'),
      log_level: z.enum(['trace', 'debug', 'info', 'warn', 'error']).default('info'),
      shutdown_grace_ms: durationMs.default(10000),
      inbox_retention_hours: positiveInt.default(72),
    })
    .prefault({}),
  http: z
    .strictObject({
      listen: listenAddress.default('127.0.0.1:8787'),
      admin_token_env: z.string().min(1).optional(),
      /** Host names (besides the listen host, localhost and loopback literals) requests may carry in `Host` and `Origin`. */
      allowed_hosts: z.array(z.string().regex(/^[A-Za-z0-9.-]+$|^\[[0-9A-Fa-f:.]+\]$/, 'write a host name or address without scheme or port, e.g. "chat.example.com"')).default([]),
    })
    .prefault({}),
  limits: z
    .strictObject({
      max_in_flight: positiveInt.default(32),
      max_queued: positiveInt.default(256),
      queue_mode: queueMode.default('followup'),
      collect_debounce_ms: durationMs.default(500),
      /** Group conversations whose unaddressed messages are kept as context (least recently active evicted first). */
      passive_max_conversations: positiveInt.default(1000),
      /** Bytes of text all that kept context may hold together. */
      passive_max_bytes: positiveInt.default(8 * 1024 * 1024),
    })
    .prefault({}),
  agent: agentSchema.optional(),
  agents: z.record(z.string().regex(/^[A-Za-z0-9_-]+$/), agentSchema).default({}),
  channels: z.array(channelSchema).default([]),
});

export type DaemonConfig = z.output<typeof configSchema>;
export type ChannelConfig = z.output<typeof channelSchema>;
export type ChannelKind = ChannelConfig['type'];
export type AgentConfig = z.output<typeof agentSchema>;
export type QueueMode = z.output<typeof queueMode>;
export type BackoffConfig = z.output<typeof backoffSchema>;
