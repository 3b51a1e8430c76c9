import { buildHistory } from '../agent/history.js';
import { userMessage } from '../contracts/errors.js';
import { HookResult } from '../contracts/hooks.js';
import type { ChannelMessage } from '../contracts/message.js';
import { type StoredTurn, turnOrigin, whenSessionsWritable, type Sessions } from '../store/sessions.js';
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
/** What session_load found, for session_save: the session, and the origin its row gets. */
interface Loaded {
  id: number;
  origin: string;
}
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

/**
 * Whether a stored turn is the answer to give `message` again: it ended done with text, and
 * was stored after the message arrived (a message id a platform used again later, for a new
 * message, is not answered from an old row).
 */
function replayable(turn: StoredTurn, message: ChannelMessage): boolean {
  return turn.ending === 'done' && turn.assistantText.trim() !== '' && turn.createdAt >= message.receivedAt;
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
        const { id } = deps.sessions.active(deps.agentName, ctx.scope);
        const origin = turnOrigin(ctx.message);
        ctx.extras.set(SESSION, { id, origin } satisfies Loaded);
        // This message run again (a crash or a stop after its answer was stored, a takeover):
        // an answer that was complete goes out again as it was, the model is not asked twice.
        // Ending the phases here also stores nothing (session_save needs a runner).
        const earlier = deps.sessions.earlierRun(id, origin);
        if (earlier && replayable(earlier, ctx.message)) return HookResult.shortCircuit(earlier.assistantText);
        if (deps.needsHistory?.() === false) return;
        // Every turn costs at least a few characters, so more rows than the budget never fit.
        const budget = deps.historyBudgetChars();
        const turns = deps.sessions.recent(id, Math.min(200, Math.ceil(budget / 8)));
        // A broken-off first run is not shown to its own re-run, whose row will replace it.
        ctx.history = buildHistory(earlier ? turns.filter((t) => t.origin !== origin) : turns, budget);
      }),
  });
  runtime.hooks.register({
    phase: 'post_response',
    name: 'session_save',
    priority: 10,
    run: (ctx) => {
      const session = ctx.extras.get(SESSION) as Loaded | undefined;
      // Commands and skipped turns never reached the agent: nothing to remember.
      if (!session || !ctx.runner || ctx.command || ctx.extras.get(SESSION_SKIP) === true) return;
      deps.sessions.append(session.id, {
        origin: session.origin,
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
