import type { ChannelAdapter, ChannelCapabilities } from '../contracts/channel.js';
import type { MessageRef, ReplyTarget } from '../contracts/message.js';
import type { FirstVisibleFirst } from './first-visible.js';

/** What a ReplyStream is given and what it returns (src/stream/reply-stream.ts). */
export type Transport = Pick<ChannelAdapter, 'send' | 'edit' | 'delete' | 'typing'> & Partial<Pick<ChannelAdapter, 'finalize' | 'openNativeStream'>>;

export interface ReplyStreamOptions {
  transport: Transport;
  capabilities: ChannelCapabilities;
  target: ReplyTarget;
  /** The channel's `edit_interval_ms`; never below the platform floor. */
  editIntervalMs?: number;
  streamMode: 'partial' | 'final';
  showToolProgress: boolean;
  /** Stable per reply (the user's message id): with the chunk index it keys idempotent sends. */
  replyKey?: string;
  /** Messages a previous run of this turn already sent (crash recovery): they are edited, not re-sent. */
  existingRefs?: readonly MessageRef[];
  /** Told whenever the set of messages holding the reply changes, so it can be persisted. */
  onRefs?: (refs: MessageRef[]) => void;
  /**
   * Waited for before each new platform message: resolves once its id can be persisted
   * (the store takes writes). A message sent while it cannot would be unknown to a process
   * restarted before the store recovers, which would send its answer again.
   */
  beforeSend?: (signal: AbortSignal) => Promise<unknown>;
  /** How long the final text keeps being retried after the turn ends. */
  finalDeadlineMs: number;
  /**
   * Hard stop (shutdown past its grace, a lost cluster lease): even the final text stops
   * retrying, and every platform call in flight is cut.
   */
  signal: AbortSignal;
  onRateLimited?: () => void;
  /** A native stream failed and the turn went on with send + edit. */
  onFallback?: () => void;
  onError?: (err: unknown, phase: 'draft' | 'final') => void;
  /** Told once, when the user first sees any text of the reply (the first-visible latency). */
  onVisible?: () => void;
  /** Shared by the daemon's replies: mid-answer draft edits wait while another reply has nothing shown yet. */
  firstVisible?: FirstVisibleFirst;
}

export interface ReplyResult {
  refs: MessageRef[];
  /** Platform requests this reply made (sends, edits, deletes; typing excluded). */
  requests: number;
  delivered: boolean;
}
