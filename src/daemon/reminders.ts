import { join } from 'node:path';
import { HookResult } from '../contracts/hooks.js';
import type { ChannelMessage } from '../contracts/message.js';
import type { PluginDefinition } from '../contracts/plugin-folder.js';
import type { TurnContext } from '../contracts/turn.js';
import type { Logger } from '../observe/logger.js';
import { type Reminder, ReminderStore } from '../store/reminders.js';
import { parseReminder, REMIND_USAGE, REMINDER_LIMITS } from './reminder-parse.js';
import { definePlugin } from './services.js';

/** The longest single wait: a far reminder is looked at again after this (setTimeout's range is ~24 days). */
const MAX_WAIT_MS = 60_000;
/** After a firing could not be stored (its channel not running yet, storage busy): first retry, doubling up to MAX_WAIT_MS. */
const RETRY_MS = 1000;
/** Firings handled per wake-up; the rest follow at once after. */
const BATCH = 50;

/** A firing's text starts so: never a slash command, whatever the reminder says. */
const FIRING_PREFIX = 'Reminder: ';

/** The inbox key of one firing: a reminder fires at most once per fire time, whoever tries. */
export const firingId = (r: Pick<Reminder, 'id' | 'fireAt'>): string => `reminder:${r.id}:${r.fireAt}`;

const when = (ms: number) =>
  new Date(ms)
    .toString()
    .replace(/ GMT.*$/, '')
    .replace(/:\d\d$/, '');

/**
 * Fires due reminders: one timer for the soonest, never one per reminder. A firing is a
 * synthetic message stored through the dispatcher like any other (its inbox key is the
 * reminder id and fire time, so a retry after kill -9 finds it stored and adds nothing);
 * only then is the reminder marked fired. The stored item is answered by `reminderHook`.
 */
export class ReminderScheduler {
  readonly #store: ReminderStore;
  readonly #deliver: (msg: ChannelMessage) => Promise<boolean>;
  readonly #log: Logger;
  #timer: NodeJS.Timeout | undefined;
  #running = false;
  #closed = false;
  #retryMs = RETRY_MS;

  constructor(store: ReminderStore, deliver: (msg: ChannelMessage) => Promise<boolean>, log: Logger) {
    this.#store = store;
    this.#deliver = deliver;
    this.#log = log;
  }

  /** Re-arms the timer for the soonest reminder (after one was added or cancelled). */
  kick(delayMs?: number): void {
    if (this.#closed) return;
    clearTimeout(this.#timer);
    const next = this.#store.nextFireAt();
    if (next === undefined && delayMs === undefined) return;
    const wait = Math.min(delayMs ?? Math.max(0, next! - Date.now()), MAX_WAIT_MS);
    this.#timer = setTimeout(() => void this.#fireDue(), wait);
  }

  async #fireDue(): Promise<void> {
    if (this.#running || this.#closed) return;
    this.#running = true;
    let retry = false;
    try {
      const due = this.#store.due(Date.now(), BATCH);
      for (const r of due) {
        if (this.#closed) return;
        try {
          const stored = await this.#deliver(firingMessage(r));
          if (!stored) this.#log.warn({ reminder: r.id, channel: r.channelId }, 'a reminder firing was not taken (its sender is no longer allowed)');
          this.#store.markFired(r.id);
          this.#log.info({ reminder: r.id, channel: r.channelId, scope: r.scope }, 'reminder fired');
        } catch (err) {
          retry = true;
          this.#log.warn({ err, reminder: r.id, channel: r.channelId, retry_ms: this.#retryMs }, 'a reminder could not fire yet; trying again');
          break;
        }
      }
    } catch (err) {
      retry = true;
      this.#log.warn({ err, retry_ms: this.#retryMs }, 'reading due reminders failed; trying again');
    } finally {
      this.#running = false;
    }
    if (retry) {
      this.kick(this.#retryMs);
      this.#retryMs = Math.min(this.#retryMs * 2, MAX_WAIT_MS);
    } else {
      this.#retryMs = RETRY_MS;
      this.kick();
    }
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
  }
}

function firingMessage(r: Reminder): ChannelMessage {
  return {
    channelId: r.channelId,
    kind: r.kind,
    messageId: firingId(r),
    chat: r.chat,
    ...(r.threadId ? { threadId: r.threadId } : {}),
    sender: r.sender,
    text: `${FIRING_PREFIX}${r.text}`,
    attachments: [],
    addressed: true,
    receivedAt: Date.now(),
    synthetic: { kind: 'reminder', id: String(r.id) },
  };
}

/** `/remind`, `/reminders` and the hook that answers a firing, as one definition for every agent. */
export function reminderDefinition(store: ReminderStore, scheduler: ReminderScheduler): PluginDefinition {
  const remind = (ctx: TurnContext, args: string): string => {
    const parsed = parseReminder(args, Date.now());
    if (!parsed.ok) return parsed.error;
    if (store.pending(ctx.scope).length >= REMINDER_LIMITS.perConversation)
      return `This conversation already has ${REMINDER_LIMITS.perConversation} reminders; cancel one first (/reminders).`;
    const m = ctx.message;
    const id = store.add({
      scope: ctx.scope,
      channelId: m.channelId,
      chat: m.chat,
      ...(m.threadId ? { threadId: m.threadId } : {}),
      sender: m.sender,
      kind: m.kind,
      fireAt: parsed.fireAt,
      text: parsed.text,
    });
    scheduler.kick();
    return `Reminder ${id} set for ${when(parsed.fireAt)} (daemon time): ${parsed.text}`;
  };
  const reminders = (ctx: TurnContext, args: string): string => {
    const cancel = /^cancel\s+(\d+)$/i.exec(args.trim());
    if (cancel) {
      const ok = store.cancel(ctx.scope, Number(cancel[1]));
      if (ok) scheduler.kick();
      return ok ? `Reminder ${cancel[1]} cancelled.` : `This conversation has no pending reminder ${cancel[1]}.`;
    }
    if (args.trim()) return 'Usage: /reminders, or /reminders cancel ID';
    const list = store.pending(ctx.scope);
    if (!list.length) return 'No reminders in this conversation.';
    return list.map((r) => `${r.id} · ${when(r.fireAt)} · ${r.text}`).join('\n');
  };
  return {
    name: 'reminders',
    description: 'chat reminders: /remind, /reminders',
    commands: [
      { name: 'remind', category: 'Reminders', usage: REMIND_USAGE, help: 'post a reminder here later (times in the daemon time zone)', handler: remind },
      { name: 'reminders', category: 'Reminders', usage: '[cancel ID]', help: "this conversation's reminders, or cancel one", handler: reminders },
    ],
    hooks: [
      {
        phase: 'pre_dispatch',
        name: 'reminder_firing',
        priority: 0,
        run: (ctx) => {
          const m = ctx.message;
          if (m.synthetic?.kind !== 'reminder') return;
          // The firing carries what to post, so whichever instance answers it needs no lookup.
          return HookResult.shortCircuit(`⏰ @${m.sender.name}: ${m.text.slice(FIRING_PREFIX.length)}`);
        },
      },
    ],
  };
}

/**
 * The `reminders` plugin: the table beside the inbox in `state_dir`, one scheduler, and the
 * commands and firing hook added to every agent through the `extensions` service.
 */
export const remindersPlugin = definePlugin({
  name: 'reminders',
  // `storage` first: the store plugin has created and migrated the database this opens again.
  inject: ['config', 'logger', 'dispatcher', 'extensions', 'storage'],
  start: (ctx) => {
    const log = ctx.use('logger');
    const dispatcher = ctx.use('dispatcher');
    const store = new ReminderStore(join(ctx.use('config').config.daemon.state_dir, 'channeld.db'));
    ctx.effect(() => store.close());
    const scheduler = new ReminderScheduler(store, (msg) => dispatcher.deliver(msg), log);
    ctx.effect(() => scheduler.close());
    ctx.effect(ctx.use('extensions').add('built-in', reminderDefinition(store, scheduler)));
    scheduler.kick();
  },
});
