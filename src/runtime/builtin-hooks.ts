import { buildHistory } from '../agent/history.js';
import { userMessage } from '../contracts/errors.js';
import { HookResult } from '../contracts/hooks.js';
import type { Attachment, ChannelMessage } from '../contracts/message.js';
import type { TurnRequest } from '../contracts/turn.js';
import { type StoredTurn, whenSessionsWritable, type Sessions } from '../store/sessions.js';
import { type Runtime, USER_SPOKE } from './runtime.js';

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
/**
 * What session_find found, for session_load and session_save: the session (none yet for a new
 * conversation: session_load creates it), the origin its row gets, and the row of a broken-off
 * earlier run of the same items that this turn's replaces.
 */
interface Loaded {
  id?: number;
  origin: string;
  replaces?: StoredTurn;
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

/** An inbox item a turn answers, as the executor tells it (`answering`). */
export interface TurnItem {
  id: number;
  message: Pick<ChannelMessage, 'channelId' | 'messageId' | 'receivedAt'>;
}

/** The items each turn answers, by its request: a request carries one message, merged when `collect` joined several. */
const answered = new WeakMap<TurnRequest, readonly TurnItem[]>();

/** Tells the session hooks which inbox items `request` answers (the executor, for every turn it runs). */
export function answering(request: TurnRequest, items: readonly TurnItem[]): TurnRequest {
  answered.set(request, items);
  return request;
}

type ItemIdentity = [channelId: string, messageId: string, itemId: number | null];

/**
 * A turn's origin: every inbox item it answers, each by channel, message id and item id (the
 * SQLite inbox row, the stream sequence), which stays the same when the item runs again and
 * differs for a message id used again (some platforms let their clients choose them). A turn run
 * without its items (not from the inbox) names its message alone, with no item id.
 */
export function turnOrigin(items: ReadonlyArray<{ id?: number; message: { channelId: string; messageId: string } }>): string {
  return JSON.stringify(items.map((i): ItemIdentity => [i.message.channelId, i.message.messageId, i.id ?? null]));
}

/**
 * How many of the items `origin` names a stored `earlier` origin names too: `all`, `some`
 * or `none`. No item id on one side (a first-build origin, `[channel, message id]`, or a turn
 * run without its items) matches any item of that message.
 */
export function sharedItems(earlier: string | null | undefined, origin: string): 'all' | 'some' | 'none' {
  const theirs = new Map<string, Set<number | null>>();
  for (const [channel, message, item] of identities(earlier)) {
    const k = JSON.stringify([channel, message]);
    theirs.set(k, (theirs.get(k) ?? new Set()).add(item));
  }
  const mine = identities(origin);
  const shared = mine.filter(([channel, message, item]) => {
    const ids = theirs.get(JSON.stringify([channel, message]));
    return ids !== undefined && (item === null || ids.has(null) || ids.has(item));
  }).length;
  return shared === 0 ? 'none' : shared === mine.length ? 'all' : 'some';
}

function identities(origin: string | null | undefined): ItemIdentity[] {
  if (!origin) return [];
  try {
    const v: unknown = JSON.parse(origin);
    if (!Array.isArray(v)) return [];
    if (typeof v[0] === 'string') return [[v[0], String(v[1]), null]];
    return v.filter((i): i is ItemIdentity => Array.isArray(i) && i.length === 3);
  } catch {
    return [];
  }
}

/**
 * What the attachments hook (src/workspace/attachments.ts) puts before a voice message's
 * transcript, in the model's input and in the session's user text: a stored turn whose user
 * text has it was answered to a voice message heard, so its answer was spoken too.
 */
export const TRANSCRIPT_MARKER = "[transcribed from the user's voice message]";

/** Whether an attachment is speech (a voice note, an audio file): what the attachments hook transcribes. */
export function isSpeech(a: Attachment): boolean {
  return a.type !== 'photo' && (a.type === 'voice' || a.type === 'audio' || a.mime?.toLowerCase().startsWith('audio/') === true);
}

/** Whether a stored turn is an answer to give again as it is: it ended done, with text. */
function replayable(turn: StoredTurn): boolean {
  return turn.ending === 'done' && turn.assistantText.trim() !== '';
}

/**
 * Finds the session, and whether this turn runs again items an earlier run answered (a crash
 * or a stop after its answer was stored, a takeover), decided here once: an answer that was
 * complete for all of them goes out again as it was (`reply`), the model is not asked twice;
 * a broken-off one is replaced by this turn's row. A row stored before these messages arrived
 * is not theirs (an item id and message id used again, as after the inbox was pruned empty).
 */
function find(
  sessions: Sessions,
  agent: string,
  ctx: { scope: string; message: ChannelMessage; request: TurnRequest },
): { loaded: Loaded; reply?: StoredTurn } {
  const items: ReadonlyArray<{ id?: number; message: TurnItem['message'] }> = answered.get(ctx.request) ?? [{ message: ctx.message }];
  const origin = turnOrigin(items);
  // Looked up, not created: a turn that a gate (the daily budget, a plugin's) refuses stores nothing.
  const id = sessions.find(agent, ctx.scope)?.id;
  if (id === undefined) return { loaded: { origin } };
  const found = sessions.earlierRun(id, (o) => sharedItems(o, origin) !== 'none');
  const arrived = items.reduce((min, i) => Math.min(min, i.message.receivedAt), Infinity);
  const earlier = found && found.createdAt >= arrived ? found : undefined;
  if (!earlier) return { loaded: { id, origin } };
  if (!replayable(earlier)) return { loaded: { id, origin, replaces: earlier } };
  // A complete answer to only some of this turn's messages (batches formed otherwise this
  // time) stays, since its text may have gone out; this turn is asked as a new one.
  if (sharedItems(earlier.origin, origin) !== 'all') return { loaded: { id, origin } };
  return { loaded: { id, origin }, reply: earlier };
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
    phase: 'post_dispatch',
    name: 'session_find',
    // Before the gates that refuse new turns (daily_budget): a stored answer given again costs
    // nothing. Commands never get here: they end the turn before post_dispatch.
    priority: -1000,
    before: ['daily_budget'],
    run: (ctx) => {
      const { loaded, reply } = find(deps.sessions, deps.agentName, ctx);
      ctx.extras.set(SESSION, loaded);
      if (reply === undefined) return;
      // The attachments hook, which marks a voice message heard to be answered aloud too, is
      // skipped with the rest: the first run's was spoken when its transcript was stored.
      if (ctx.message.attachments.some(isSpeech) && reply.userText.split('\n').some((line) => line.startsWith(TRANSCRIPT_MARKER)))
        ctx.extras.set(USER_SPOKE, true);
      // Ending the phases here also stores nothing (session_save needs a runner).
      return HookResult.shortCircuit(reply.assistantText);
    },
  });
  runtime.hooks.register({
    phase: 'pre_agent_build',
    name: 'session_load',
    priority: 10,
    run: (ctx) => {
      const session = ctx.extras.get(SESSION) as Loaded | undefined;
      if (!session) return;
      // A new conversation's session is created here, past the gates: it may have to wait for
      // the store (another process's lock).
      return whenSessionsWritable(deps.sessions, ctx.signal, () => {
        const id = (session.id ??= deps.sessions.active(deps.agentName, ctx.scope).id);
        if (deps.needsHistory?.() === false) return;
        // Every turn costs at least a few characters, so more rows than the budget never fit.
        const budget = deps.historyBudgetChars();
        const turns = deps.sessions.recent(id, Math.min(200, Math.ceil(budget / 8)));
        // A broken-off first run is not shown to its own re-run, whose row will replace it.
        const replaced = session.replaces?.rowId;
        ctx.history = buildHistory(replaced === undefined ? turns : turns.filter((t) => t.rowId !== replaced), budget);
      });
    },
  });
  runtime.hooks.register({
    phase: 'post_response',
    name: 'session_save',
    priority: 10,
    run: (ctx) => {
      const session = ctx.extras.get(SESSION) as Loaded | undefined;
      // Commands and skipped turns never reached the agent: nothing to remember.
      if (session?.id === undefined || !ctx.runner || ctx.command || ctx.extras.get(SESSION_SKIP) === true) return;
      deps.sessions.append(
        session.id,
        {
          origin: session.origin,
          userText: (ctx.extras.get(SESSION_USER_TEXT) as string | undefined) ?? ctx.message.text,
          assistantText: ctx.text,
          reasoning: ctx.reasoning,
          toolCalls: [...ctx.toolCalls],
          ending: ctx.ending?.type ?? (ctx.error ? 'error' : 'done'),
          model: ctx.input?.model ?? null,
        },
        session.replaces,
      );
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
