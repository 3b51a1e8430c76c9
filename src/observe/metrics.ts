import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Bucket bounds (seconds) of the turn latency histogram; the /admin charts' p50/p99 come from them too. */
export const TURN_DURATION_BUCKETS_S = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
/** Bucket bounds (seconds) of the first-visible-update histogram: finer below 3 s, where replies should land. */
export const FIRST_VISIBLE_BUCKETS_S = [0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30];

/**
 * The daemon's metrics, on a registry of its own so several daemons (tests, benches)
 * can live in one process.
 */
export class Metrics {
  readonly registry = new Registry();
  /**
   * Token and cost usage per (agent, model, channel), added up between scrapes: a turn's usage
   * is one map update instead of five labelled increments (each hashes its labels). Folded
   * into channeld_tokens_total and channeld_cost_total whenever either is read.
   */
  readonly #usage = new Map<string, UsageSums>();
  readonly received = new Counter({
    name: 'channeld_messages_received_total',
    help: 'Messages stored in the inbox',
    labelNames: ['channel'],
    registers: [this.registry],
  });
  readonly duplicates = new Counter({
    name: 'channeld_messages_duplicate_total',
    help: 'Redeliveries dropped by the inbox',
    labelNames: ['channel'],
    registers: [this.registry],
  });
  readonly refused = new Counter({
    name: 'channeld_messages_refused_total',
    help: 'Messages refused: queue full, not allowed',
    labelNames: ['channel', 'reason'],
    registers: [this.registry],
  });
  readonly quotaRefusals = new Counter({
    name: 'channeld_quota_refusals_total',
    help: 'Messages a quota refused before the model was called, by limit (no sender or channel: no personal data)',
    labelNames: ['limit'],
    registers: [this.registry],
  });
  readonly held = new Gauge({
    name: 'channeld_messages_held',
    help: 'Messages held in memory because the store (or the shared inbox) cannot take them yet',
    labelNames: ['channel'],
    registers: [this.registry],
  });
  readonly dropped = new Counter({
    name: 'channeld_messages_dropped_total',
    help: 'Messages dropped before the inbox: own, bots',
    labelNames: ['channel', 'reason'],
    registers: [this.registry],
  });
  readonly queued = new Gauge({ name: 'channeld_turns_queued', help: 'Turns waiting to run', registers: [this.registry] });
  readonly inFlight = new Gauge({ name: 'channeld_turns_in_flight', help: 'Turns running', registers: [this.registry] });
  readonly turnDuration = new Histogram({
    name: 'channeld_turn_duration_seconds',
    help: 'Turn duration from start to final text',
    labelNames: ['channel', 'outcome'],
    buckets: TURN_DURATION_BUCKETS_S,
    registers: [this.registry],
  });
  readonly firstVisible = new Histogram({
    name: 'channeld_first_visible_seconds',
    help: 'From the start of a turn to the first text its user sees (a draft, a native stream, or the final reply)',
    labelNames: ['channel'],
    buckets: FIRST_VISIBLE_BUCKETS_S,
    registers: [this.registry],
  });
  readonly turnRuntime = new Histogram({
    name: 'channeld_turn_runtime_seconds',
    help: "The runtime's own time per turn: hooks, commands and prompt assembly, the agent's run excluded",
    labelNames: ['agent', 'outcome'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });
  readonly draftEdits = new Histogram({
    name: 'channeld_draft_requests_per_reply',
    help: 'Platform requests per reply',
    buckets: [1, 2, 3, 5, 8, 13, 21, 34, 55],
    registers: [this.registry],
  });
  readonly rateLimited = new Counter({
    name: 'channeld_platform_429_total',
    help: 'Platform 429 answers',
    labelNames: ['channel'],
    registers: [this.registry],
  });
  readonly streamFallbacks = new Counter({
    name: 'channeld_native_stream_fallbacks_total',
    help: 'Native streams that fell back to send+edit',
    labelNames: ['channel'],
    registers: [this.registry],
  });
  readonly channelState = new Gauge({
    name: 'channeld_channel_up',
    help: '1 when the channel is connected',
    labelNames: ['channel'],
    registers: [this.registry],
  });
  /** Never removed with its channel: a channel restarted by a reload counts on. */
  readonly channelConnections = new Counter({
    name: 'channeld_channel_connections_total',
    help: 'New platform connections per channel since the daemon started',
    labelNames: ['channel'],
    registers: [this.registry],
  });
  readonly modelTurns = new Counter({
    name: 'channeld_model_turns_total',
    help: 'Turns served, by agent and model',
    labelNames: ['agent', 'model'],
    registers: [this.registry],
  });
  readonly failovers = new Counter({
    name: 'channeld_model_failovers_total',
    help: 'Models that failed before any text, so the turn moved to the next',
    labelNames: ['agent', 'model'],
    registers: [this.registry],
  });
  readonly toolCallsInvalid = new Counter({
    name: 'channeld_tool_calls_invalid_total',
    help: 'Tool calls whose arguments were not JSON or failed the schema, by agent, tool and outcome (repaired, returned to the model)',
    labelNames: ['agent', 'tool', 'outcome'],
    registers: [this.registry],
  });
  readonly storageDegraded = new Gauge({
    name: 'channeld_storage_degraded',
    help: '1 while the database cannot take writes (see storage in /status)',
    registers: [this.registry],
  });
  readonly storageFaults = new Counter({
    name: 'channeld_storage_faults_total',
    help: 'Times the database stopped taking writes, by SQLite code; also uploads the disk refused (ENOSPC, EDQUOT) or the upload quota refused (QUOTA)',
    labelNames: ['code'],
    registers: [this.registry],
  });
  readonly tokens = new Counter({
    name: 'channeld_tokens_total',
    help: 'Model tokens per turn, by agent, model, channel and type (input, output, reasoning, cached)',
    labelNames: ['agent', 'model', 'channel', 'type'],
    registers: [this.registry],
    collect: () => this.#foldUsage(),
  });
  readonly cost = new Counter({
    name: 'channeld_cost_total',
    help: 'Spend from the [models] price table, by agent, model and channel',
    labelNames: ['agent', 'model', 'channel'],
    registers: [this.registry],
    collect: () => this.#foldUsage(),
  });
  readonly pluginErrors = new Counter({
    name: 'channeld_plugin_errors_total',
    help: "Throws from plugin folders' hooks, commands and tools, by plugin and kind",
    labelNames: ['plugin', 'kind'],
    registers: [this.registry],
  });
  readonly intentCalls = new Counter({
    name: 'channeld_intent_total',
    help: 'Unaddressed group messages judged by reply_intent = classifier, by decision (reply, ignore, failed, rate_limited)',
    labelNames: ['channel', 'decision'],
    registers: [this.registry],
  });
  readonly intentLatency = new Histogram({
    name: 'channeld_intent_latency_seconds',
    help: 'Intent classifier call latency',
    labelNames: ['channel'],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5],
    registers: [this.registry],
  });
  readonly intentTokens = new Counter({
    name: 'channeld_intent_tokens_total',
    help: 'Tokens spent by the intent classifier (its cost)',
    labelNames: ['channel', 'kind'],
    registers: [this.registry],
  });
  readonly evictions = new Counter({
    name: 'channeld_memory_evictions_total',
    help: 'Entries evicted from bounded in-memory structures keyed by user input',
    labelNames: ['structure'],
    registers: [this.registry],
  });
  readonly memoryTrims = new Histogram({
    name: 'channeld_memory_trim_seconds',
    help: 'Collections that gave freed memory back to the system (idle: after work; load: RSS far above its settled size), and their pause',
    labelNames: ['reason'],
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
    registers: [this.registry],
  });
  readonly firings = new Counter({
    name: 'channeld_firings_total',
    help: 'Reminder and [[schedules]] firings: fired, caught_up (a missed one run at start), skipped (not stored, or its sender no longer allowed)',
    labelNames: ['source', 'outcome'],
    registers: [this.registry],
  });
  readonly reloads = new Counter({ name: 'channeld_reloads_total', help: 'Config reloads', labelNames: ['result'], registers: [this.registry] });

  constructor(defaultMetrics = true) {
    if (defaultMetrics) collectDefaultMetrics({ register: this.registry, prefix: 'channeld_' });
  }

  /** Counts a stored turn's tokens and cost (shown in channeld_tokens_total and channeld_cost_total from the next read). */
  recordUsage(r: UsageCounts): void {
    const key = `${r.agent}\u0000${r.model}\u0000${r.channel}`;
    let u = this.#usage.get(key);
    if (!u) {
      u = { labels: { agent: r.agent, model: r.model, channel: r.channel }, input: 0, output: 0, reasoning: 0, cached: 0, cost: null };
      this.#usage.set(key, u);
    }
    u.input += r.inputTokens;
    u.output += r.outputTokens;
    u.reasoning += r.reasoningTokens;
    u.cached += r.cachedTokens;
    if (r.cost !== null) u.cost = (u.cost ?? 0) + r.cost;
  }

  #foldUsage(): void {
    for (const u of this.#usage.values()) {
      this.tokens.inc({ ...u.labels, type: 'input' }, u.input);
      this.tokens.inc({ ...u.labels, type: 'output' }, u.output);
      this.tokens.inc({ ...u.labels, type: 'reasoning' }, u.reasoning);
      this.tokens.inc({ ...u.labels, type: 'cached' }, u.cached);
      if (u.cost !== null) this.cost.inc(u.labels, u.cost);
    }
    this.#usage.clear();
  }
}

/** What recordUsage counts of a turn. */
export interface UsageCounts {
  agent: string;
  model: string;
  channel: string;
  inputTokens: number;
  outputTokens: number;
  reasoningTokens: number;
  cachedTokens: number;
  /** Null when the model has no price: no cost series is made for it. */
  cost: number | null;
}

interface UsageSums {
  labels: { agent: string; model: string; channel: string };
  input: number;
  output: number;
  reasoning: number;
  cached: number;
  cost: number | null;
}
