import type { LifecycleObserver } from '../inbox/lifecycle.js';
import type { DaemonConfig, QueueMode } from '../config/schema.js';
import type { ParsedCommand } from '../contracts/commands.js';
import type { ChannelMessage } from '../contracts/message.js';
import type { Topology } from '../contracts/topology.js';
import type { Logger } from '../observe/logger.js';
import type { Metrics } from '../observe/metrics.js';
import type { DispatchChannel } from './channel.js';
import type { TurnJob, TurnRunEnding } from './lanes.js';
import type { TaskTracker } from './tracker.js';

/** Runs one turn to its final text; resolves with how it ended. */
export type ExecuteTurn = (job: TurnJob, signal: AbortSignal) => Promise<TurnRunEnding>;

/** What the dispatcher calls of the topology (src/contracts/topology.ts), the same way in every mode. */
export type DispatchTopology = Pick<Topology, 'intake' | 'controls' | 'recover'>;

/** A classifier's verdict on an unaddressed group message. */
export type IntentDecision = 'reply' | 'ignore';

export interface DispatcherOptions {
  /** Where messages are stored, controls run and crashed work comes back: one node or a cluster. */
  topology: DispatchTopology;
  metrics: Metrics;
  log: Logger;
  limits(): DaemonConfig['limits'];
  channel(id: string): DispatchChannel | undefined;
  execute: ExecuteTurn;
  /** Sends a short control reply (Stopped., busy, not allowed) outside any turn. */
  notify(msg: ChannelMessage, text: string): Promise<void>;
  /** A conversation's /queue choice, if any. */
  queueModeOf?(scope: string, channelId: string): QueueMode | undefined;
  /** The agent a channel is bound to, for per-agent limits. */
  agentOf?(channelId: string): { agent: string; max: number | undefined };
  /** Every running and queued turn; a private one when not given. */
  tracker?: TaskTracker;
  /**
   * Aborted when the daemon must exit now: waits for running turns (shutdown, a channel
   * settling, a cluster hand-over) stop waiting, so a call that hangs cannot hold them.
   */
  hardStop?: AbortSignal;
  /**
   * Commands that act on a running turn and so cannot wait in its lane (`/approve`,
   * `/deny`, `/stop tool`): returns the action for a command it handles, undefined otherwise.
   * The action's text, if any, is sent back as a control reply.
   */
  control?(msg: ChannelMessage, scope: string, cmd: ParsedCommand): (() => Promise<string | undefined>) | undefined;
  /**
   * reply_intent = "classifier": judges an unaddressed group message, given the group's
   * recent messages (newest last). Resolves "ignore" on any failure; records its own metrics.
   */
  classify?(msg: ChannelMessage, recent: readonly ChannelMessage[], signal: AbortSignal): Promise<IntentDecision>;
  /**
   * Told about every message a channel delivers except the bot's own, addressed or not, with
   * what access rules made of it (the message_received hooks). Must return at once.
   */
  onReceived?(msg: ChannelMessage, verdict: 'accepted' | 'unaddressed' | 'not_allowed' | 'ignored' | 'bot'): void;
  /** More observers of the item lifecycle (tracing). */
  observers?: readonly LifecycleObserver[];
}
