import type { Subscription } from '@nats-io/transport-node';
import type { ParsedCommand } from '../contracts/commands.js';
import { channelOfScope, type ChannelMessage } from '../contracts/message.js';
import { errorMessage } from '../contracts/errors.js';
import type { Logger } from '../observe/logger.js';
import type { ClusterServices } from './connect.js';
import { scopeToken } from './partition-key.js';
import { serveRequests } from './requests.js';
import type { PgWriter } from './pg-writer.js';

/**
 * What travels on `<ns>.control.<scope token>`: a control command (`/approve`, `/deny`,
 * `/stop tool`) as the instance that received it parsed it, for the owner of `target`'s
 * partition, which runs it against its own waiting questions and running calls with the
 * same "who may decide" checks as on one node (it has the sender in `msg`).
 */
export interface ControlRequest {
  /** The conversation whose turn the command acts on: it picks the instance. */
  target: string;
  /** The sender's conversation scope, as the command is run with it. */
  scope: string;
  msg: ChannelMessage;
  cmd: ParsedCommand;
}

/** The owner's answer: the reply for the sender (none when the edited question says it all). */
interface ControlReply {
  reply?: string;
}

/** How long the instance that received a command waits for the turn's owner to answer. */
const CONTROL_REPLY_TIMEOUT_MS = 2000;

/**
 * Controls go where the turn runs, as `/stop` does: a request on the target scope's
 * subject, which only the owner of its partition answers. An approval id names its
 * question's conversation (found in PostgreSQL), so a button pressed in a group whose
 * members have their own scopes still reaches the turn that asked. When nobody answers (the
 * partition is changing hands) the command runs on this instance: an approval decision is
 * then left with the question in PostgreSQL, and the new owner applies it.
 */
export class ControlRouter {
  constructor(
    private readonly s: ClusterServices,
    private readonly w: PgWriter,
    private readonly log: Logger,
  ) {}

  async send(msg: ChannelMessage, scope: string, cmd: ParsedCommand, here: () => Promise<string | undefined>): Promise<string | undefined> {
    const target = await this.#target(msg, scope, cmd);
    const req: ControlRequest = { target, scope, msg, cmd };
    try {
      const reply = await this.s.nc.request(this.s.names.controlSubject(scopeToken(target)), JSON.stringify(req), { timeout: CONTROL_REPLY_TIMEOUT_MS });
      return reply.json<ControlReply>().reply;
    } catch (err) {
      this.log.info({ scope: target, command: cmd.name, reason: errorMessage(err) }, 'no instance runs the turn now; control applied here');
      return here();
    }
  }

  /** The conversation an `/approve ID` or `/deny ID` acts on: its question's, when exactly one waits under that id in this channel. */
  async #target(msg: ChannelMessage, scope: string, cmd: ParsedCommand): Promise<string> {
    const id = cmd.name === 'approve' || cmd.name === 'deny' ? (cmd.args.split(/\s+/)[0] ?? '').toLowerCase() : '';
    if (!id) return scope;
    try {
      const rows = await this.w.read<{ scope: string }>(`SELECT scope FROM tool_approvals WHERE id = $1 AND state = 'pending'`, [id]);
      const here = rows.filter((r) => channelOfScope(r.scope) === msg.channelId);
      return here.length === 1 ? here[0]!.scope : scope;
    } catch (err) {
      this.log.warn({ err }, 'could not look up the approval; sending the decision to this conversation');
      return scope;
    }
  }
}

/** Answers the control requests for the partitions this instance owns. */
export function serveControls(
  s: ClusterServices,
  owns: (scope: string) => boolean,
  run: (msg: ChannelMessage, scope: string, cmd: ParsedCommand) => Promise<string | undefined> | undefined,
  log: Logger,
): Subscription {
  return serveRequests<ControlRequest>(s, s.names.controlWildcard, 'control', log, (req, msg) => {
    if (typeof req?.target !== 'string' || !owns(req.target)) return;
    const answer = (reply: string | undefined) => msg.respond(JSON.stringify({ ...(reply ? { reply } : {}) } satisfies ControlReply));
    void (async () => {
      try {
        answer(await run(req.msg, req.scope, req.cmd));
        log.info({ scope: req.target, command: req.cmd.name }, 'control from another instance');
      } catch (e) {
        log.warn({ err: e, command: req.cmd.name }, 'control command failed');
        answer('That did not work; please try again.');
      }
    })();
  });
}
