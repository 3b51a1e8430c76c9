import { createHash, randomBytes } from 'node:crypto';
import type { Button } from '../contracts/channel.js';
import { channelOfScope, replyTargetOf, type ChannelMessage, type MessageRef, type ReplyTarget } from '../contracts/message.js';
import { errorMessage } from '../contracts/errors.js';
import type { Logger } from '../observe/logger.js';
import type { ToolGate } from '../mcp/mcp-tools.js';
import type { ApprovalOffer, ApprovalRow, Approvals } from '../store/approvals.js';

export interface ApprovalOptions {
  store: Approvals;
  log: Logger;
  /** The agent's `approvers` and `approval_timeout_ms`, read per call (reload applies). */
  policy(agent: string): { approvers: readonly string[]; timeoutMs: number };
  /**
   * Posts the question (with buttons where the platform has them); the ref lets it be edited.
   * `signal` is the tool call's: a call stopped while its question is posted is not asked.
   */
  send(target: ReplyTarget, text: string, buttons: Button[], signal: AbortSignal): Promise<MessageRef>;
  /**
   * Replaces the question with its outcome (and removes the buttons). Not cut by the tool
   * call's signal (a stopped call still shows "cancelled"): the composition bounds it.
   */
  edit(channelId: string, ref: MessageRef, text: string): Promise<void>;
}

type Decision = { verdict: 'approve' | 'deny'; by: string } | { verdict: 'timeout' };

interface Waiting {
  id: string;
  key: string;
  channelId: string;
  scope: string;
  starter: string;
  approvers: readonly string[];
  resolve(d: Decision): void;
}

const ARGS_SHOWN_CHARS = 300;

/**
 * One tool call's identity across re-runs of its turn: the agent, the turn's message, the
 * call's position in the turn (model step, place in the step), the tool and its arguments.
 */
export function callKey(agent: string, msg: ChannelMessage, position: { step: number; index: number } | undefined, tool: string, args: unknown): string {
  const p = position ?? { step: 0, index: 0 };
  return createHash('sha256')
    .update(JSON.stringify([agent, msg.channelId, msg.messageId, p.step, p.index, tool, args ?? {}]))
    .digest('hex');
}

/** "90 s", "5 min": how long the question waited. */
function duration(ms: number): string {
  return ms < 120_000 ? `${Math.round(ms / 1000)} s` : `${Math.round(ms / 60_000)} min`;
}

/** The arguments as the question shows them: JSON, shortened. */
export function shortArgs(args: unknown): string {
  const json = JSON.stringify(args ?? {}) ?? '{}';
  return json.length > ARGS_SHOWN_CHARS ? `${json.slice(0, ARGS_SHOWN_CHARS)}…` : json;
}

/**
 * Approval in chat: a call that needs it posts a question with Approve / Deny in the
 * conversation and waits. Only the person whose message started the turn, or one of the
 * agent's `approvers`, may decide; no decision within `approval_timeout_ms` is a deny.
 * Each call's question and outcome are stored, keyed by the turn's message, the call's
 * position in the turn (model step, place in the step) and the call itself,
 * so a turn re-run after a restart asks again if nothing was decided, and never starts a
 * call that was already started.
 */
export class ApprovalCoordinator implements ToolGate {
  readonly #o: ApprovalOptions;
  readonly #waiting = new Map<string, Waiting>();

  constructor(options: ApprovalOptions) {
    this.#o = options;
  }

  async admit(call: Parameters<ToolGate['admit']>[0], signal: AbortSignal): ReturnType<ToolGate['admit']> {
    const msg = call.ctx.message;
    if (!msg) return { run: false, reply: { error: 'this tool needs approval in a chat, and this call has none' } };
    // The call's position in the turn is part of its identity: the same call made again in a
    // later step is asked for and run again, while a re-run of the turn (after a restart)
    // finds each call's row and never runs one twice.
    const key = callKey(call.agent, msg, call.ctx.position, call.tool, call.args);
    const row = await this.#o.store.get(key);
    switch (row?.state) {
      case 'done':
        return { run: false, reply: row.result ? (JSON.parse(row.result) as unknown) : '' };
      case 'running':
        return { run: false, reply: { error: 'this call was started before a restart and may have run; it is not run twice' } };
      case 'denied':
        return { run: false, reply: { error: 'the user denied this tool call' } };
      case 'approved':
        return await this.#admitted(key);
    }
    const policy = this.#o.policy(call.agent);
    const offered = row?.state === 'pending' ? this.#offered(row, msg.sender.id, policy.approvers) : undefined;
    if (offered) return await this.#applyOffer(key, row!, offered, msg.channelId, call.tool);
    const id = randomBytes(3).toString('hex');
    await this.#o.store.ask(key, id, call.ctx.scope, call.tool);
    // A question left from before a restart is retired: this one replaces it.
    if (row?.promptRef) await this.#edit(msg.channelId, JSON.parse(row.promptRef) as MessageRef, `🔐 ${call.tool}: asked again below after a restart.`);
    const decided = new Promise<Decision>((resolve) =>
      this.#waiting.set(id, { id, key, channelId: msg.channelId, scope: call.ctx.scope, starter: msg.sender.id, approvers: policy.approvers, resolve }),
    );
    // As inline code, so "__" in names and arguments is not read as Markdown emphasis.
    const question = `🔐 Approve this tool call?\n\`${call.tool} ${shortArgs(call.args).replaceAll('`', "'")}\`\nReply /approve ${id} or /deny ${id}.`;
    let ref: MessageRef | undefined;
    let timer: NodeJS.Timeout | undefined;
    const onAbort = () => this.#waiting.get(id)?.resolve({ verdict: 'deny', by: '' });
    try {
      ref = await this.#o.send(
        replyTargetOf(msg),
        question,
        [
          { label: 'Approve', data: `/approve ${id}`, style: 'primary' },
          { label: 'Deny', data: `/deny ${id}`, style: 'danger' },
        ],
        signal,
      );
    } catch (err) {
      this.#waiting.delete(id);
      this.#o.log.warn({ err, tool: call.tool }, 'could not post the approval question');
      return { run: false, reply: { error: `approval could not be asked in the chat (${errorMessage(err)}); the call did not run` } };
    }
    // The question is posted and its buttons work: a failed write of its id costs only its
    // retirement (a re-run after a restart edits the question the stored ref names), so the
    // call waits for the decision as usual.
    try {
      await this.#o.store.update(key, 'pending', { promptRef: JSON.stringify(ref) });
    } catch (err) {
      this.#o.log.warn(
        { err, tool: call.tool, approval: id },
        'could not store the message id of the approval question; waiting for the decision anyway (a re-run after a restart cannot retire this question)',
      );
    }
    this.#o.log.info({ tool: call.tool, approval: id, scope: call.ctx.scope }, 'tool call waiting for approval');
    try {
      timer = setTimeout(() => this.#waiting.get(id)?.resolve({ verdict: 'timeout' }), policy.timeoutMs);
      signal.addEventListener('abort', onAbort, { once: true });
      if (signal.aborted) onAbort();
      const d = await decided;
      if (signal.aborted) {
        // Stopped while waiting: nothing was decided, so a re-run would ask again.
        await this.#edit(msg.channelId, ref, `🔐 ${call.tool}: cancelled.`);
        return { run: false, reply: { error: 'cancelled by the user' } };
      }
      if (d.verdict === 'approve') {
        await this.#o.store.update(key, 'approved', { decidedBy: d.by });
        await this.#edit(msg.channelId, ref, `✅ ${call.tool}: approved.`);
        return await this.#admitted(key);
      }
      await this.#o.store.update(key, 'denied', d.verdict === 'deny' ? { decidedBy: d.by } : {});
      const within = duration(policy.timeoutMs);
      await this.#edit(
        msg.channelId,
        ref,
        d.verdict === 'timeout' ? `⌛ ${call.tool}: no answer within ${within}, so it was denied.` : `❌ ${call.tool}: denied.`,
      );
      return {
        run: false,
        reply: { error: d.verdict === 'timeout' ? `nobody approved this tool call within ${within}, so it was denied` : 'the user denied this tool call' },
      };
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      this.#waiting.delete(id);
    }
  }

  /** A decision left on the question while its turn moved here, if its author may decide. */
  #offered(row: ApprovalRow, starter: string, approvers: readonly string[]): ApprovalOffer | undefined {
    if (!row.offer) return undefined;
    const offer = JSON.parse(row.offer) as ApprovalOffer;
    return offer.by === starter || approvers.includes(offer.by) ? offer : undefined;
  }

  /** Applies a decision made while no process waited on the question (its turn was being taken over). */
  async #applyOffer(key: string, row: ApprovalRow, offer: ApprovalOffer, channelId: string, tool: string): ReturnType<ToolGate['admit']> {
    const ref = row.promptRef ? (JSON.parse(row.promptRef) as MessageRef) : undefined;
    this.#o.log.info({ tool, approval: row.id, verdict: offer.verdict }, 'decision left during a takeover applied');
    if (offer.verdict === 'approve') {
      await this.#o.store.update(key, 'approved', { decidedBy: offer.by });
      if (ref) await this.#edit(channelId, ref, `✅ ${tool}: approved.`);
      return await this.#admitted(key);
    }
    await this.#o.store.update(key, 'denied', { decidedBy: offer.by });
    if (ref) await this.#edit(channelId, ref, `❌ ${tool}: denied.`);
    return { run: false, reply: { error: 'the user denied this tool call' } };
  }

  /** Marked running before the call starts: a crash from here on never runs it again. */
  async #admitted(key: string): Promise<{ run: true; done(reply: unknown): void }> {
    await this.#o.store.update(key, 'running');
    return {
      run: true,
      // A result that is not stored only makes a re-run say "may have run" instead of repeating it.
      done: (reply) =>
        void this.#o.store
          .update(key, 'done', { result: JSON.stringify(reply) })
          .catch((err: unknown) => this.#o.log.warn({ err }, 'could not store a tool call result')),
    };
  }

  async #edit(channelId: string, ref: MessageRef, text: string): Promise<void> {
    try {
      await this.#o.edit(channelId, ref, text);
    } catch (err) {
      this.#o.log.warn({ err, channel: channelId }, 'could not update the approval question');
    }
  }

  /**
   * `/approve [id]` or `/deny [id]` (typed, or a button's payload) from `msg`. Returns the
   * reply for the sender, or undefined when the edited question already says it all.
   */
  async decide(msg: ChannelMessage, scope: string, verdict: 'approve' | 'deny', id: string): Promise<string | undefined> {
    let w: Waiting | undefined;
    if (id) w = this.#waiting.get(id.toLowerCase());
    else {
      const here = [...this.#waiting.values()].filter((x) => x.channelId === msg.channelId && x.scope === scope);
      if (here.length > 1) return `Several tool calls wait for approval here; use /${verdict} ID (${here.map((x) => x.id).join(', ')}).`;
      w = here[0];
    }
    if (!w && id) return this.#offer(msg, verdict, id.toLowerCase());
    if (!w || w.channelId !== msg.channelId) return id ? 'That approval is no longer waiting.' : 'Nothing is waiting for approval here.';
    if (msg.sender.id !== w.starter && !w.approvers.includes(msg.sender.id)) return 'Only the person who asked, or an approver, can decide this.';
    w.resolve({ verdict, by: msg.sender.id });
    return undefined;
  }

  /**
   * A decision for a question nobody waits on here. In cluster mode the controls reach the
   * instance that runs the turn; this is left for a turn being taken over (its old owner is
   * gone, the new one has not asked again yet): the decision is stored with the question,
   * and the new owner applies it when it reaches the call, after the same "who may decide"
   * check (it knows who started the turn).
   */
  async #offer(msg: ChannelMessage, verdict: 'approve' | 'deny', id: string): Promise<string> {
    const rows = (await this.#o.store.pending(id)).filter((r) => channelOfScope(r.scope) === msg.channelId);
    if (rows.length !== 1 || !(await this.#o.store.offer(rows[0]!.key, id, { verdict, by: msg.sender.id }))) return 'That approval is no longer waiting.';
    this.#o.log.info({ approval: id, verdict }, 'decision left for a turn being taken over');
    return 'Noted: this answer is moving to another instance, which applies your decision when it resumes.';
  }
}
