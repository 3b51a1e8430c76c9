import { buildHistory } from '../agent/history.js';
import { userMessage } from '../contracts/errors.js';
import { whenSessionsWritable, type Sessions } from '../store/sessions.js';
import type { Runtime } from './runtime.js';

export interface BuiltinHookDeps {
  agentName: string;
  sessions: Sessions;
  historyBudgetChars: () => number;
  /** False for an agent that never reads history (the echo agent): the lookup is skipped. */
  needsHistory?: () => boolean;
  /**
   * Told, once per turn, how long the runtime itself took: hooks, commands and prompt
   * assembly, the agent's run excluded (the daemon's turn-runtime histogram).
   */
  observeTurn?: (outcome: string, runtimeSeconds: number) => void;
}

const SESSION = 'session';
/** An extras key: what the session stores as the user's words when the message alone does not say it (attachments). */
export const SESSION_USER_TEXT = 'session_user_text';
/** An extras key: set (to true) by a hook so that this turn is not stored in the session (the incognito mode). */
export const SESSION_SKIP = 'session_skip';
const TIMING = 'timing';

interface Timing {
  startedMs: number;
  /** When the agent's run began (after pre_execute) and how long it took (up to post_response). */
  agentStartedMs?: number;
  agentMs: number;
}

/** Session load/save, error normalization, cleanup of set-up handles, per-turn timing. */
export function registerBuiltinHooks(runtime: Runtime, deps: BuiltinHookDeps): void {
  runtime.hooks.register({
    phase: 'pre_dispatch',
    name: 'timing_start',
    priority: 0,
    run: (ctx) => void ctx.extras.set(TIMING, { startedMs: performance.now(), agentMs: 0 } satisfies Timing),
  });
  // The agent runs between pre_execute's last hook and post_response's first.
  runtime.hooks.register({
    phase: 'pre_execute',
    name: 'timing_agent_start',
    priority: 1_000_000,
    run: (ctx) => {
      const t = ctx.extras.get(TIMING) as Timing | undefined;
      if (t) t.agentStartedMs = performance.now();
    },
  });
  runtime.hooks.register({
    phase: 'post_response',
    name: 'timing_agent_end',
    priority: -1_000_000,
    run: (ctx) => {
      const t = ctx.extras.get(TIMING) as Timing | undefined;
      if (t?.agentStartedMs !== undefined) t.agentMs = performance.now() - t.agentStartedMs;
    },
  });
  runtime.hooks.register({
    phase: 'pre_agent_build',
    name: 'session_load',
    priority: 10,
    // A new conversation's session may have to wait for the store (another process's lock).
    run: (ctx) =>
      whenSessionsWritable(deps.sessions, ctx.signal, () => {
        const session = deps.sessions.active(deps.agentName, ctx.scope);
        ctx.extras.set(SESSION, session);
        if (deps.needsHistory?.() === false) return;
        // Every turn costs at least a few characters, so more rows than the budget never fit.
        const budget = deps.historyBudgetChars();
        ctx.history = buildHistory(deps.sessions.recent(session.id, Math.min(200, Math.ceil(budget / 8))), budget);
      }),
  });
  runtime.hooks.register({
    phase: 'post_response',
    name: 'session_save',
    priority: 10,
    run: (ctx) => {
      const session = ctx.extras.get(SESSION) as { id: number } | undefined;
      // Commands and skipped turns never reached the agent: nothing to remember.
      if (!session || !ctx.runner || ctx.command || ctx.extras.get(SESSION_SKIP) === true) return;
      deps.sessions.append(session.id, {
        userText: (ctx.extras.get(SESSION_USER_TEXT) as string | undefined) ?? ctx.message.text,
        assistantText: ctx.text,
        reasoning: ctx.reasoning,
        toolCalls: [...ctx.toolCalls],
        ending: ctx.ending?.type ?? (ctx.error ? 'error' : 'done'),
        model: ctx.input?.model ?? null,
      });
    },
  });
  runtime.hooks.register({
    phase: 'on_error',
    name: 'error_normalization',
    priority: 0,
    run: (ctx) => {
      ctx.errorReply ??= userMessage(ctx.error);
    },
  });
  runtime.hooks.register({
    phase: 'finally',
    name: 'cleanup',
    priority: 0,
    // Synchronous when there is nothing to clean up: an async hook makes the rest of its phase wait a microtask.
    run: (ctx) => {
      const fns = ctx.takeCleanups();
      if (!fns.length) return;
      return (async () => {
        for (const fn of fns) {
          try {
            await fn();
          } catch {
            // One failed cleanup must not keep the others from running.
          }
        }
      })();
    },
  });
  runtime.hooks.register({
    phase: 'finally',
    name: 'timing_end',
    priority: 1000,
    run: (ctx) => {
      const t = ctx.extras.get(TIMING) as Timing | undefined;
      // No ending yet means a skipped turn that said nothing: the runtime ends it as done.
      if (t && deps.observeTurn) deps.observeTurn(ctx.ending?.type ?? 'done', Math.max(0, performance.now() - t.startedMs - t.agentMs) / 1000);
    },
  });
}
