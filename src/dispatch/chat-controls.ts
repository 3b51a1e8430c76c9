import type { ParsedCommand } from '../contracts/commands.js';
import type { ChannelMessage } from '../contracts/message.js';
import { STOP_REPLIES, STOPPED_BY_STOP, type ControlOutcome, type ControlRouting, type StopOrder, type StopResult } from '../contracts/topology.js';
import type { Logger } from '../observe/logger.js';
import type { Lanes } from './lanes.js';

/** The reply when a control command threw. */
const CONTROL_FAILED_REPLY = 'That did not work; please try again.';

interface ChatControlsOptions {
  routing: ControlRouting;
  lanes: Lanes;
  log: Logger;
  notify(msg: ChannelMessage, text: string): Promise<void>;
}

/**
 * Chat commands that cannot wait in their conversation's lane: `/stop`, and the controls
 * that act on a running turn (`/approve`, `/deny`, `/stop tool`). The topology routes them
 * to where the turn runs (src/contracts/topology.ts ControlRouting); what runs here is here.
 */
export class ChatControls {
  readonly #o: ChatControlsOptions;

  constructor(options: ChatControlsOptions) {
    this.#o = options;
  }

  /**
   * /stop stops what the sender started: their running turn and their queued messages. The
   * channel's `admins` stop the running turn whoever started it, and `/stop all` (admins)
   * also drops everyone's queued messages. A cancelled turn shows its partial text with the
   * stop marker (or the marker alone): that is the one visible result, so the short reply
   * goes out only when no running turn was stopped.
   */
  async stop(msg: ChannelMessage, scope: string, args: string, admins: readonly string[]): Promise<boolean> {
    const admin = msg.chat.type === 'dm' || admins.includes(msg.sender.id);
    const all = args.toLowerCase() === 'all';
    const refused = all && !admin;
    const order: StopOrder = { ...(all || msg.chat.type === 'dm' ? {} : { senderId: msg.sender.id }), runningOfAnyone: admin };
    const here = (o: StopOrder): StopResult => this.#o.lanes.stopOf(scope, o.senderId, STOPPED_BY_STOP, o.runningOfAnyone);
    const outcome = await this.#o.routing.stop(msg, scope, refused ? undefined : order, here);
    if (outcome === 'duplicate') return true;
    if (refused) await this.#reply(msg, "Only the channel's admins can stop everyone's answers; /stop stops yours.");
    else if (!outcome.cancelled) await this.#reply(msg, outcome.dropped > 0 ? STOP_REPLIES.stopped : STOP_REPLIES.nothing);
    return true;
  }

  /**
   * A bare `/stop` in a group whose sender has no turn here: their turn may run on another
   * instance (ControlRouting.stopBare). False when nothing of theirs was stopped (context).
   */
  async stopBare(msg: ChannelMessage, scope: string): Promise<boolean> {
    const outcome = await this.#o.routing.stopBare?.(msg, scope);
    if (!outcome) return false;
    if (outcome !== 'duplicate' && !outcome.cancelled) await this.#reply(msg, STOP_REPLIES.stopped);
    return true;
  }

  /** Runs a control command (`action`, found for `cmd`) where the turn it acts on runs. */
  async control(msg: ChannelMessage, scope: string, cmd: ParsedCommand, action: () => Promise<string | undefined>): Promise<boolean> {
    const here = async (): Promise<string | undefined> => {
      try {
        return await action();
      } catch (err) {
        this.#o.log.warn({ err, channel: msg.channelId }, 'control command failed');
        return CONTROL_FAILED_REPLY;
      }
    };
    await this.#reply(msg, await this.#o.routing.control(msg, scope, cmd, here));
    return true;
  }

  /** A redelivered command did nothing and says nothing. */
  async #reply(msg: ChannelMessage, outcome: ControlOutcome): Promise<void> {
    if (outcome && outcome !== 'duplicate') await this.#o.notify(msg, outcome);
  }
}
