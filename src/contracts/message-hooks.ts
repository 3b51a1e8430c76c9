import type { Hook } from './hooks.js';
import type { ChannelMessage, ReplyTarget } from './message.js';

/**
 * The message phases: around every message, not around a turn. `message_received` sees each
 * message a channel delivers (also unaddressed ones in groups, and ones access rules refuse),
 * never the bot's own; `message_sent` sees each text the daemon delivered to a chat (a
 * turn's final reply, a notice).
 */
export const messagePhases = ['message_received', 'message_sent'] as const;
export type MessagePhase = (typeof messagePhases)[number];

/** What a message hook sees. Read-only: a hook observes; it cannot change or stop delivery. */
export type MessageHookEvent =
  | {
      phase: 'message_received';
      message: ChannelMessage;
      /** Whether the bot is asked: a DM, a mention, a reply to it (false: group context). */
      addressed: boolean;
      /** What access rules made of it: `accepted`, or why it goes no further. */
      verdict: 'accepted' | 'unaddressed' | 'not_allowed' | 'ignored' | 'bot';
    }
  | { phase: 'message_sent'; target: ReplyTarget; text: string };

/** The default and the longest time one message hook may take; past it the hook's signal aborts. */
export const MESSAGE_HOOK_TIMEOUT_MS = 5_000;
export const MESSAGE_HOOK_MAX_TIMEOUT_MS = 60_000;

/**
 * A hook on every message, listed in a plugin folder's `hooks` like the turn hooks. It runs
 * beside delivery, never before it: a slow hook is cut at `timeout_ms` and a throwing one is
 * logged with its plugin's name; neither delays or stops the message.
 */
export interface MessageHook {
  phase: MessagePhase;
  name: string;
  /** At most this long (default 5000, at most 60000); `signal` aborts then. */
  timeout_ms?: number;
  run(event: MessageHookEvent, signal: AbortSignal): void | Promise<void>;
}

/** Tells a message hook from a turn hook in a plugin folder's `hooks`. */
export function isMessageHook(h: Hook | MessageHook): h is MessageHook {
  return (messagePhases as readonly string[]).includes(h.phase);
}
