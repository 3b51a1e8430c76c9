import { z } from 'zod';
import { HookResult } from '../contracts/hooks.js';
import type { ChannelMessage } from '../contracts/message.js';
import type { PluginDefinition } from '../contracts/plugin-folder.js';
import type { Tool, ToolContext } from '../contracts/tools.js';
import type { Reminders } from '../store/reminders.js';
import { callKey } from '../tools/approvals.js';
import { parseReminder, parseWhen, REMIND_USAGE, REMINDER_LIMITS, reminderText } from './reminder-parse.js';

const when = (ms: number) =>
  new Date(ms)
    .toString()
    .replace(/ GMT.*$/, '')
    .replace(/:\d\d$/, '');

/** A firing's text starts so: never a slash command, whatever the reminder says. */
export const FIRING_PREFIX = 'Reminder: ';

const FULL = `This conversation already has ${REMINDER_LIMITS.perConversation} reminders; cancel one first (/reminders).`;

/**
 * Stores a reminder for the conversation `m` belongs to; its id, or undefined when the
 * conversation is full. `origin` makes the add idempotent: a turn re-run after kill -9 or a
 * takeover adds again, and gets the reminder the first run stored.
 */
async function addFor(
  store: Reminders,
  scope: string,
  m: ChannelMessage,
  fireAt: number,
  text: string,
  origin: string | undefined,
): Promise<number | undefined> {
  return store.add(
    {
      scope,
      channelId: m.channelId,
      chat: m.chat,
      ...(m.threadId ? { threadId: m.threadId } : {}),
      sender: m.sender,
      kind: m.kind,
      fireAt,
      text,
      ...(origin !== undefined ? { origin } : {}),
    },
    REMINDER_LIMITS.perConversation,
  );
}

/** `/remind`'s origin: its message (a message is one turn, re-run as a whole). */
const commandOrigin = (m: ChannelMessage): string => `remind:${JSON.stringify([m.channelId, m.messageId])}`;

/**
 * A `schedule_message` call's origin: tool approvals' identity of a call (`callKey`), which
 * a re-run of the turn gives again. A tool's ctx has no agent name, so none is in it: a
 * message (channel + id) starts one turn of one agent, and the call's position in that turn
 * (model step, place in the step; not the provider's call id, new on every request) with its
 * arguments tells its calls apart. A call without a position (not made by the model runner)
 * has no origin: it is not deduplicated, as before.
 */
function toolOrigin(ctx: ToolContext, msg: ChannelMessage, input: unknown): string | undefined {
  return ctx.position ? `tool:${callKey('', msg, ctx.position, 'schedule_message', input)}` : undefined;
}

/**
 * `schedule_message`: the model sets a reminder in the conversation of its turn, stored and
 * bounded exactly as `/remind` (count per conversation, text length, a year ahead). It is a
 * plain registered tool, so the agent's `tools` list and tool approval settings apply to it.
 */
export function scheduleMessageTool(store: Reminders, kick: () => void): Tool<{ when: string; text: string }> {
  return {
    name: 'schedule_message',
    description:
      'Schedule a reminder message to be posted in this conversation later, addressed to the user. ' +
      '`when` is "in DURATION" (e.g. "in 10m", "in 1h30m", "in 2d"), "at HH:MM" (the next such time, server time zone) ' +
      'or an ISO date with an offset such as "2026-12-24T18:00+01:00"; at most a year ahead.',
    input: z.object({
      when: z.string().max(64).describe('when to post: "in 10m", "at 09:00" or an ISO date'),
      text: z.string().max(REMINDER_LIMITS.maxTextChars).describe('what to post'),
    }),
    run: async (input, ctx) => {
      if (!ctx.message) return 'Not scheduled: there is no conversation to post into.';
      const now = Date.now();
      const at = parseWhen(input.when, now);
      if (!at.ok) return `Not scheduled: ${at.error}`;
      const parsed = reminderText(input.text, at.fireAt, now);
      if (!parsed.ok) return `Not scheduled: ${parsed.error}`;
      const id = await addFor(store, ctx.scope, ctx.message, parsed.fireAt, parsed.text, toolOrigin(ctx, ctx.message, input));
      if (id === undefined) return `Not scheduled: ${FULL}`;
      kick();
      return `Scheduled as reminder ${id} for ${new Date(parsed.fireAt).toISOString()}; the user can list it with /reminders.`;
    },
  };
}

/** `/remind`, `/reminders`, `schedule_message` and the hook that answers a firing, as one definition for every agent. */
export function reminderDefinition(store: Reminders, kick: () => void): PluginDefinition {
  return {
    name: 'reminders',
    description: 'chat reminders: /remind, /reminders, the schedule_message tool',
    commands: [
      {
        name: 'remind',
        category: 'Reminders',
        usage: REMIND_USAGE,
        help: 'post a reminder here later (times in the daemon time zone)',
        handler: async (ctx, args) => {
          const parsed = parseReminder(args, Date.now());
          if (!parsed.ok) return parsed.error;
          const id = await addFor(store, ctx.scope, ctx.message, parsed.fireAt, parsed.text, commandOrigin(ctx.message));
          if (id === undefined) return FULL;
          kick();
          return `Reminder ${id} set for ${when(parsed.fireAt)} (daemon time): ${parsed.text}`;
        },
      },
      {
        name: 'reminders',
        category: 'Reminders',
        usage: '[cancel ID]',
        help: "this conversation's reminders, or cancel one",
        handler: async (ctx, args) => {
          const cancel = /^cancel\s+(\d{1,15})$/i.exec(args.trim());
          if (cancel) {
            const ok = await store.cancel(ctx.scope, Number(cancel[1]));
            if (ok) kick();
            return ok ? `Reminder ${cancel[1]} cancelled.` : `This conversation has no pending reminder ${cancel[1]}.`;
          }
          if (args.trim()) return 'Usage: /reminders, or /reminders cancel ID';
          const list = await store.pending(ctx.scope);
          if (!list.length) return 'No reminders in this conversation.';
          return list.map((r) => `${r.id} · ${when(r.fireAt)} · ${r.text}`).join('\n');
        },
      },
    ],
    tools: [scheduleMessageTool(store, kick)],
    hooks: [
      {
        phase: 'pre_dispatch',
        name: 'reminder_firing',
        priority: 0,
        run: (ctx) => {
          const m = ctx.message;
          if (m.synthetic?.kind !== 'reminder') return;
          // The firing carries what to post, so whichever instance answers it needs no lookup.
          // One a scheduled turn set has no person to address: its sender is the schedule.
          const to = m.kind === 'schedule' ? '' : `@${m.sender.name}: `;
          return HookResult.shortCircuit(`⏰ ${to}${m.text.slice(FIRING_PREFIX.length)}`);
        },
      },
    ],
  };
}
