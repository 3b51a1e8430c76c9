import type { AgentConfig } from '../config/schema.js';
import { CodedError, errorMessage } from '../contracts/errors.js';
import type { ChannelMessage } from '../contracts/message.js';
import { BACKGROUND_REPLY, type Tool, type ToolContext } from '../contracts/tools.js';
import type { ToolGate } from '../mcp/mcp-tools.js';
import type { Logger } from '../observe/logger.js';
import { CancelledByUser, RunningCalls } from '../runtime/running-calls.js';
import { needsApproval } from '../runtime/tool-policy.js';
import { raceAbort, sleep } from '../util/abortable.js';
import { callKey } from './approvals.js';

/** A follow-up's text starts so: never a slash command, whatever the tool returned. */
export const FOLLOW_UP_PREFIX = '[Background tool call finished] ';
/** Tries to store a follow-up turn, doubling the wait from the first (storage busy, shutting down). */
const DELIVER_TRIES = 4;
const DELIVER_RETRY_MS = 500;

export interface ToolCallsOptions {
  log: Logger;
  /** The agent's config as it is now (a reload applies to the next call). */
  agent(name: string): AgentConfig | undefined;
}

/**
 * Every tool call of every agent, whatever the tool (built-in, plugin folder, MCP), goes
 * through here: approval in chat when the agent's `tool_approval` (or the tool's own
 * `approval`) says so, a per-call cancel for `/stop tool`, and, past the agent's
 * `background_after_ms`, a move to the background: the model is told the call goes on, the
 * turn may end, and the result comes back as a follow-up turn stored through the durable
 * inbox (keyed by the call, so it is stored once however often it is offered).
 */
export class ToolCalls {
  readonly running = new RunningCalls();
  /** Approval in chat; set once the approval coordinator exists. */
  gate: ToolGate | undefined;
  /** Stores a follow-up turn (the dispatcher's deliver); set once the dispatcher exists. */
  deliver: ((msg: ChannelMessage) => Promise<boolean>) | undefined;
  readonly #o: ToolCallsOptions;
  /** scope → calls in the background there. */
  readonly #background = new Map<string, Set<AbortController>>();
  readonly #closed = new AbortController();

  constructor(options: ToolCallsOptions) {
    this.#o = options;
  }

  /** Calls in the background in a scope now. */
  backgroundIn(scope: string): number {
    return this.#background.get(scope)?.size ?? 0;
  }

  /** Cancels every background call (the daemon stops); their results are not posted. */
  close(): void {
    this.#closed.abort();
    for (const set of this.#background.values()) for (const c of set) c.abort(new CancelledByUser());
  }

  /** `t` with approval, `/stop tool` and the background move, for agent `agent`. */
  wrap(agent: string, t: Tool): Tool {
    return { ...t, run: (input, ctx) => this.#run(agent, t, input, ctx) };
  }

  async #run(agent: string, t: Tool, input: unknown, ctx: ToolContext): Promise<unknown> {
    const cfg = this.#o.agent(agent);
    const call = new AbortController();
    const onTurnAbort = () => call.abort(ctx.signal.reason);
    if (ctx.signal.aborted) onTurnAbort();
    else ctx.signal.addEventListener('abort', onTurnAbort, { once: true });
    const untrack = this.running.track(ctx.scope, call);
    let background = false;
    try {
      let done: ((reply: unknown) => void) | undefined;
      if (cfg && needsApproval(cfg, t)) {
        if (!this.gate) return { error: 'this tool needs approval, and approval is not available here; the call did not run' };
        const verdict = await this.gate.admit({ agent, tool: t.name, args: input, ctx }, call.signal);
        if (!verdict.run) return verdict.reply;
        done = verdict.done;
      }
      // An approved call's outcome is stored, whoever waits for it: a re-run of the turn gives it instead of running again.
      const work = this.#call(t, input, { ...ctx, signal: call.signal }, call.signal).then(
        (reply) => {
          done?.(reply);
          return reply;
        },
        (err: unknown) => {
          done?.({ error: errorMessage(err) });
          throw err;
        },
      );
      const afterMs = cfg?.background_after_ms;
      const first = afterMs !== undefined && ctx.message ? await this.#raceTimer(work, afterMs, call.signal) : await work;
      if (first !== LATER) return first;
      const slots = this.#background.get(ctx.scope)?.size ?? 0;
      if (slots >= (cfg?.max_background_calls ?? 0)) {
        this.#o.log.info({ tool: t.name, scope: ctx.scope, background: slots }, 'no background slot free; the turn waits for the tool call');
        return await work;
      }
      background = true;
      // From here the call outlives its turn: only `/stop tool` (or shutdown) cancels it.
      ctx.signal.removeEventListener('abort', onTurnAbort);
      this.#toBackground(agent, t, input, ctx, call, work, untrack);
      ctx.log?.('running in the background');
      return BACKGROUND_REPLY;
    } finally {
      if (!background) {
        untrack();
        ctx.signal.removeEventListener('abort', onTurnAbort);
      }
    }
  }

  /**
   * The tool's run; a call stopped by `/stop tool` reads "cancelled by the user" at once,
   * even from a tool that does not watch its signal. Other throws go on up.
   */
  async #call(t: Tool, input: unknown, ctx: ToolContext, signal: AbortSignal): Promise<unknown> {
    try {
      return await raceAbort(
        Promise.resolve().then(() => t.run(input, ctx)),
        signal,
      );
    } catch (err) {
      if (signal.reason instanceof CancelledByUser) return { error: 'cancelled by the user' };
      throw err;
    }
  }

  /** The call's result, or LATER when it runs past `ms` (the timer goes with the call). */
  async #raceTimer(work: Promise<unknown>, ms: number, signal: AbortSignal): Promise<unknown> {
    const timer = new AbortController();
    try {
      return await Promise.race([work, sleep(ms, AbortSignal.any([timer.signal, signal])).then(() => (signal.aborted ? work : LATER))]);
    } finally {
      timer.abort();
    }
  }

  #toBackground(agent: string, t: Tool, input: unknown, ctx: ToolContext, call: AbortController, work: Promise<unknown>, untrack: () => void): void {
    let set = this.#background.get(ctx.scope);
    if (!set) this.#background.set(ctx.scope, (set = new Set()));
    set.add(call);
    const msg = ctx.message!;
    const key = callKey(agent, msg, ctx.position, t.name, input);
    this.#o.log.info({ tool: t.name, scope: ctx.scope, call: key.slice(0, 12) }, 'tool call went on in the background');
    void work
      .catch((err: unknown) => ({ error: errorMessage(err) }))
      .then(async (reply) => {
        untrack();
        set.delete(call);
        if (set.size === 0 && this.#background.get(ctx.scope) === set) this.#background.delete(ctx.scope);
        if (call.signal.aborted) {
          this.#o.log.info({ tool: t.name, scope: ctx.scope }, 'background tool call cancelled; no follow-up');
          return;
        }
        await this.#post(followUp(agent, msg, key, t.name, reply), t.name);
      });
  }

  /** Stores the follow-up turn, retrying a refusal that may pass (storage busy) a few times. */
  async #post(msg: ChannelMessage, tool: string): Promise<void> {
    let wait = DELIVER_RETRY_MS;
    for (let i = 1; ; i++) {
      try {
        if (!this.deliver) throw new CodedError('TOOL_RESULT_UNDELIVERED', 'the dispatcher is not running');
        await this.deliver(msg);
        return;
      } catch (err) {
        if (i >= DELIVER_TRIES || this.#closed.signal.aborted) {
          const e = new CodedError('TOOL_RESULT_UNDELIVERED', `the result of ${tool} could not be stored: ${errorMessage(err)}`, { cause: err });
          this.#o.log.error({ err: e, code: e.code, tool, channel: msg.channelId }, e.message);
          return;
        }
        await sleep(wait, this.#closed.signal);
        wait *= 2;
      }
    }
  }
}

const LATER = Symbol('later');

/** The synthetic message that brings a background call's result back as a turn of the same agent. */
function followUp(agent: string, m: ChannelMessage, key: string, tool: string, reply: unknown): ChannelMessage {
  const text = typeof reply === 'string' ? reply : (JSON.stringify(reply) ?? '');
  return {
    channelId: m.channelId,
    kind: m.kind,
    messageId: `tool-result:${key}`,
    chat: m.chat,
    ...(m.threadId ? { threadId: m.threadId } : {}),
    sender: m.sender,
    text: `${FOLLOW_UP_PREFIX}${tool} returned:\n${text}`,
    attachments: [],
    addressed: true,
    receivedAt: Date.now(),
    synthetic: { kind: 'tool_result', id: key, agent },
  };
}
