import type { AgentEvent, Usage } from '../contracts/agent-events.js';
import type { AgentContext, AgentRunner } from '../contracts/agent-runner.js';
import { CodedError, userText, type ErrorCode } from '../contracts/errors.js';
import { CommandRegistry } from './commands.js';
import { commandOf } from '../contracts/commands.js';
import type { TurnContext, TurnRequest } from '../contracts/turn.js';
import { Turn } from './context.js';
import { HookRegistry } from './hooks.js';
import { type Hook, HookResult, type Phase } from '../contracts/hooks.js';
import { ModeRegistry } from './modes.js';
import { PromptManager } from './prompt.js';
import { boundedTool, ToolRegistry } from './tool-registry.js';
import type { Tool, ToolSelection } from '../contracts/tools.js';

export interface RuntimeOptions {
  /** Builds the runner for this turn (the workspace's provider client). */
  runnerFor(ctx: TurnContext): AgentRunner;
  /** Modes active in a conversation. */
  modesOf?(scope: string): ReadonlySet<string>;
  /** The model this conversation chose, if any. */
  modelOf?(scope: string): string | undefined;
  /** Workspace features tools may require. */
  features?: ReadonlySet<string>;
  /** The agent's tool allowlist. */
  toolAllow?(): readonly string[] | undefined;
  /** The agent runs with a sandbox (`requires_sandbox` tools are offered). */
  sandbox?(): boolean;
  /** Wraps each offered tool for this turn (approval, `/stop tool`, background calls). */
  wrapTool?(t: Tool): Tool;
  /** Tool results longer than this are cut before the model sees them (unbounded when absent). */
  maxToolResultChars?(): number;
  /**
   * The agent's skills, asked once per turn when it is built: `known` (in skills_dir) and the
   * live set of those loaded in this turn so far (it starts empty).
   */
  skillsFor?(ctx: TurnContext): { known: ReadonlySet<string>; loaded: ReadonlySet<string> };
  /** Told about hook and contributor failures that the turn survives. */
  onHookError?(phase: Phase, hook: string, err: unknown): void;
}

/** The outcome the dispatcher records. */
/** An extras key: set (to true) when the user's message was a transcribed voice note, so the answer may be spoken too. */
export const USER_SPOKE = 'user_spoke';

export interface TurnOutcome {
  ending: 'done' | 'error' | 'cancelled';
  text: string;
  command?: string;
  /** Tokens in and out, as the provider reported them (or estimated); on `done` only. */
  usage?: Usage;
  /** The error code when the turn ended in an error. */
  errorCode?: string;
  /** The user's message was a transcribed voice note (`[agent] speech_model` answers it aloud too). */
  spoke?: boolean;
}

/**
 * Runs every turn through the fixed phase sequence. Features are hooks, commands, tools,
 * prompt contributors and modes registered on its registries; this method does not change
 * when one is added.
 */
export class Runtime {
  readonly hooks = new HookRegistry();
  readonly commands = new CommandRegistry();
  readonly tools = new ToolRegistry();
  readonly modes: ModeRegistry = new ModeRegistry(this);
  readonly prompt: PromptManager;
  readonly #o: RuntimeOptions;

  constructor(options: RuntimeOptions) {
    this.#o = options;
    this.prompt = new PromptManager((name, err) => options.onHookError?.('pre_agent_build', `prompt:${name}`, err));
  }

  /** Modes active in a conversation. */
  modesOf(scope: string): ReadonlySet<string> {
    return this.#o.modesOf?.(scope) ?? new Set();
  }

  /** What decides which tools a conversation with these modes is offered. */
  toolSelection(modes: ReadonlySet<string>): ToolSelection {
    const allow = this.#o.toolAllow?.();
    return { modes, features: this.#o.features ?? new Set(), ...(allow ? { allow } : {}), sandbox: this.#o.sandbox?.() ?? false };
  }

  async run(request: TurnRequest): Promise<TurnOutcome> {
    const ctx = new Turn(request, this.modesOf(request.scope));
    // A phase is awaited only when one of its hooks returned a promise (see #phase).
    let p: boolean | Promise<boolean> | void | Promise<void>;
    try {
      let skip = (p = this.#phase('pre_dispatch', ctx)) instanceof Promise ? await p : p;
      if (!skip) skip = (p = this.#dispatchCommand(ctx)) instanceof Promise ? await p : p;
      if (!skip) skip = (p = this.#phase('post_dispatch', ctx)) instanceof Promise ? await p : p;
      if (!skip) skip = (p = this.#phase('pre_agent_build', ctx)) instanceof Promise ? await p : p;
      if (!skip) {
        await this.#build(ctx);
        skip = (p = this.#phase('post_agent_build', ctx)) instanceof Promise ? await p : p;
      }
      if (!skip) skip = (p = this.#phase('pre_execute', ctx)) instanceof Promise ? await p : p;
      // The agent's events, inline rather than in a method of their own: the turn waits here
      // for its whole answer, and an async method would keep a second suspended frame (its
      // generator, registers, promise and await closures) per running turn.
      if (!skip) {
        for await (const event of ctx.runner!.run(ctx.input!, this.#agentContext(ctx), ctx.signal)) {
          ctx.emit(event);
          if (ctx.ending) break;
        }
        if (!ctx.ending)
          ctx.emit(ctx.signal.aborted ? { type: 'cancelled' } : { type: 'error', code: 'AGENT_NO_ENDING', message: userText('AGENT_NO_ENDING') });
      }
    } catch (err) {
      await this.#fail(ctx, err);
    }
    // post_response runs after commands, skip_agent and errors alike; finally always.
    try {
      if ((p = this.#phase('post_response', ctx)) instanceof Promise) await p;
    } catch (err) {
      await this.#fail(ctx, err);
    }
    if ((p = this.#isolated('finally', ctx)) instanceof Promise) await p;
    // A turn that ended without an ending (a hook skipped the agent and said nothing) still finishes.
    if (!ctx.ending) ctx.emit({ type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } });
    const ending = ctx.ending!;
    return {
      ending: ending.type,
      text: ctx.text,
      ...(ctx.command ? { command: ctx.command } : {}),
      ...(ending.type === 'done' ? { usage: ending.usage } : {}),
      ...(ending.type === 'error' ? { errorCode: ending.code } : {}),
      ...(ctx.extras.get(USER_SPOKE) === true ? { spoke: true } : {}),
    };
  }

  async #fail(ctx: TurnContext, err: unknown): Promise<void> {
    ctx.error = err;
    const p = this.#isolated('on_error', ctx);
    if (p instanceof Promise) await p;
    if (ctx.ending) return;
    if (ctx.signal.aborted) return ctx.emit({ type: 'cancelled' });
    const code: ErrorCode = err instanceof CodedError ? err.code : 'TURN_FAILED';
    ctx.emit({ type: 'error', code, message: ctx.errorReply ?? userText('TURN_FAILED') });
  }

  /**
   * Runs a phase's hooks in order; true when the rest up to post_response is skipped. Only a
   * hook that returns a promise is awaited, and the phase itself returns a promise only from
   * the first such hook on: most hooks of a plain turn answer at once, and an async function
   * per phase was a promise and a microtask each, seven per turn.
   */
  #phase(phase: Phase, ctx: TurnContext, from = 0): boolean | Promise<boolean> {
    const hooks = this.hooks.ordered(phase);
    for (let i = from; i < hooks.length; i++) {
      const hook = hooks[i]!;
      if (hook.mode && !ctx.modes.has(hook.mode)) continue;
      const ran = hook.run(ctx);
      if (ran instanceof Promise) return ran.then((r) => this.#result(r, ctx) || this.#phase(phase, ctx, i + 1));
      if (this.#result(ran, ctx)) return true;
    }
    return false;
  }

  /** Whether a hook's result skips the rest of the turn (a short circuit replies first). */
  #result(r: ReturnType<Hook['run']>, ctx: TurnContext): boolean {
    const result = (r as HookResult | undefined) ?? HookResult.continue;
    if (result.kind === 'short_circuit') {
      ctx.replyText(result.reply);
      return true;
    }
    return result.kind === 'skip_agent';
  }

  /** on_error and finally: every hook runs even when one throws. Synchronous while its hooks are. */
  #isolated(phase: Phase, ctx: TurnContext, from = 0): void | Promise<void> {
    const hooks = this.hooks.ordered(phase);
    for (let i = from; i < hooks.length; i++) {
      const hook = hooks[i]!;
      if (hook.mode && !ctx.modes.has(hook.mode)) continue;
      let ran: unknown;
      try {
        ran = hook.run(ctx);
      } catch (err) {
        this.#o.onHookError?.(phase, hook.name, err);
        continue;
      }
      if (ran instanceof Promise)
        return ran.then(
          () => this.#isolated(phase, ctx, i + 1),
          (err: unknown) => {
            this.#o.onHookError?.(phase, hook.name, err);
            return this.#isolated(phase, ctx, i + 1);
          },
        );
    }
  }

  /** True when the message was a command (answered here); a promise only while a command runs. */
  #dispatchCommand(ctx: TurnContext): boolean | Promise<boolean> {
    const parsed = commandOf(ctx.message, ctx.request.botName);
    if (!parsed) return false;
    const cmd = this.commands.find(parsed.name, ctx.modes);
    if (!cmd) {
      if (ctx.request.unknownCommands === 'agent') return false;
      ctx.replyText(`Unknown command /${parsed.name}, see /help.`);
      return true;
    }
    ctx.command = cmd.name;
    return (async () => {
      ctx.replyText(await cmd.handler(ctx, parsed.args));
      return true;
    })();
  }

  async #build(ctx: TurnContext): Promise<void> {
    ctx.runner = this.#o.runnerFor(ctx);
    const max = this.#o.maxToolResultChars?.();
    const skills = this.#o.skillsFor?.(ctx);
    const sel = this.toolSelection(ctx.modes);
    // Tools that wait for a skill go to the model too, but each step offers them only once loaded.
    const selected = this.tools.select(skills ? { ...sel, skills: skills.known } : sel);
    const tools = selected.map((t) => this.#offer(t, max));
    const activeTools =
      skills && tools.some((t) => t.requires_skills?.length)
        ? () => tools.filter((t) => (t.requires_skills ?? []).every((k) => skills.loaded.has(k))).map((t) => t.name)
        : undefined;
    const model = this.#o.modelOf?.(ctx.scope);
    const prompt = this.prompt.build(ctx);
    ctx.input = {
      system: prompt instanceof Promise ? await prompt : prompt,
      history: ctx.history,
      text: ctx.message.text,
      tools,
      ...(activeTools ? { activeTools } : {}),
      ...(model ? { model } : {}),
    };
  }

  /**
   * Each selected tool as the model is offered it (its result bounded, then wrapped), made
   * once per tool and bound rather than once per turn: both depend on nothing of the turn,
   * every running turn kept its copies, and they grow with the number of tools (a tool
   * server offers dozens). A tool registered anew (a reload, a tool server's changed list)
   * is a new key.
   */
  readonly #offered = new WeakMap<Tool, { max: number | undefined; tool: Tool }>();

  #offer(t: Tool, max: number | undefined): Tool {
    const made = this.#offered.get(t);
    if (made && made.max === max) return made.tool;
    const bounded = max === undefined ? t : boundedTool(t, max);
    const tool = this.#o.wrapTool ? this.#o.wrapTool(bounded) : bounded;
    this.#offered.set(t, { max, tool });
    return tool;
  }

  /** What the agent runner sees of the turn. */
  #agentContext(ctx: TurnContext): AgentContext {
    return {
      scope: ctx.scope,
      channelId: ctx.message.channelId,
      signal: ctx.signal,
      message: ctx.message,
      emit: (e: AgentEvent) => ctx.emit(e),
      ...(ctx.request.onModel ? { onModel: ctx.request.onModel } : {}),
    };
  }
}
