import type { z } from 'zod';
import type { TrackedTask } from '../dispatch/tracker.js';
import type { DaemonStatus } from './daemon-status.js';
import type { UsageFilter, UsageRow, UsageTotals } from '../store/usage-ledger.js';
import type { ChartReport } from '../observe/chart-report.js';

/** What actions may ask of the running daemon. */
export interface ManagementApi {
  status(): DaemonStatus;
  /** Applies the config file; with `dryRun`, only validates it in the daemon's own environment. */
  reload(options?: { dryRun?: boolean }): Promise<{ ok: boolean; generation: number; errors: string[]; dry_run?: boolean; file?: string }>;
  turns(): TrackedTask[];
  /** Stops a turn by id: this instance's, or in cluster mode the instance's that runs it. */
  stopTurn(id: string): Promise<'cancelled' | 'dropped' | undefined>;
  sessions(): Promise<Array<{ channel: string; agent: string; conversations: number; sessions: number; last_activity: string | null }>>;
  /** One conversation as its user sees it (the slash face of status). */
  conversation(agent: string, scope: string): Record<string, string | number>;
  /** Stored turn usage matching the filter: per (channel, agent, model), and the sum. */
  usage(filter: UsageFilter): Promise<{ rows: UsageRow[]; total: UsageTotals }>;
  /** An agent's `daily_budget` today; undefined without one. */
  budget(agent: string): { daily: number; spent_today: number; left: number } | undefined;
  /** Where one sender stands against the quotas of a channel; empty without quotas (or for its admins). */
  quotaStanding(agent: string, channelId: string, senderId: string): Promise<Array<{ limit: string; used: number; max: number; resets_at: string }>>;
  /** The senders and channels that used most of their quotas' current windows, most first. */
  quotaTop(limit: number): Promise<Array<{ limit: string; channel: string; sender: string | null; used: number }>>;
  /** The /admin charts: per-minute figures of the last `minutes` minutes (the cluster's in cluster mode). */
  charts(minutes: number): Promise<ChartReport>;
  /** Starts the new build and hands over to it (`channeld upgrade`); resolves once it took over or failed. */
  upgrade?(options: { exec?: string }): Promise<{ ok: boolean; pid?: number; error?: string; took_ms: number }>;
}

/** Who is asking: an operator (HTTP, CLI) or a chat user in one conversation (slash). */
export type ActionCaller = { face: 'http' | 'cli' } | { face: 'slash'; scope: string; channelId: string; agent: string; senderId: string };

export interface ActionContext {
  api: ManagementApi;
  caller: ActionCaller;
}

/**
 * A management action, declared once. Its faces are generated from it: an HTTP route at
 * `/actions/<name>` (GET when `readOnly`, POST otherwise; JSON in and out), a
 * `channeld <cli>` subcommand that calls that route, and a slash command for chat users
 * (only for actions a user may run on their own conversation).
 */
export interface Action<I extends z.ZodType = z.ZodType, O extends z.ZodType = z.ZodType> {
  name: string;
  description: string;
  input: I;
  output: O;
  /** Read-only actions are GET; the rest are POST. */
  readOnly: boolean;
  /** Extra HTTP paths (e.g. `/status`), same method and handler. */
  httpAliases?: string[];
  cli?: {
    name?: string /** Positional CLI arguments, in order, as input keys. */;
    args?: string[] /** Optional positional arguments after `args`. */;
    optionalArgs?: string[];
  };
  slash?: { name?: string; help?: string /** Positional words after the command, as input keys. */; args?: string[] };
  handler(input: z.output<I>, ctx: ActionContext): z.input<O> | Promise<z.input<O>>;
  /** The CLI's exit status for a result that is an answer but not a success (a refused reload: 78). */
  exitStatus?(output: z.output<O>): number;
  /** A readable rendering for the CLI and chat (JSON otherwise). */
  format?(output: z.output<O>): string;
}

/** Declares an action with its types inferred. */
export function defineAction<I extends z.ZodType, O extends z.ZodType>(a: Action<I, O>): Action<I, O> {
  return a;
}
