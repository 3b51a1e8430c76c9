import { describe, expect, it } from 'vitest';
import type { ToolContext } from '../../../src/contracts/tools.js';
import type { TurnContext } from '../../../src/contracts/turn.js';
import { reminderDefinition, scheduleMessageTool } from '../../../src/daemon/reminder-commands.js';
import { REMINDER_LIMITS } from '../../../src/daemon/reminder-parse.js';
import { openDb } from '../../../src/store/db.js';
import { ReminderStore } from '../../../src/store/reminders.js';
import { userMessage } from '../../helpers/recording-adapter.js';

// A turn re-run after kill -9 (or, in cluster mode, on the instance that took it over) runs
// from the start: the model calls its tools again, a command is handled again. Each case
// below does what such a re-run does, on a real store.

const idOf = (answer: unknown) => Number(/reminder (\d+)/i.exec(String(answer))?.[1]);

describe('schedule_message and /remind when their turn is re-run', () => {
  it('the tool called again with the same call (message, position, arguments) stores one reminder and answers its id again', async () => {
    const store = new ReminderStore(openDb(':memory:'));
    const tool = scheduleMessageTool(store, () => {});
    const message = userMessage('tg', 'remind me to drink water in 10 minutes');
    const ctx = (position: { step: number; index: number }): ToolContext => ({
      signal: AbortSignal.timeout(5000),
      scope: 'tg:chat-1',
      timeZone: 'UTC',
      position,
      message,
    });
    const input = { when: 'in 10m', text: 'drink some water' };

    const first = await tool.run(input, { ...ctx({ step: 0, index: 0 }), callId: 'call-a' });
    expect(first).toMatch(/^Scheduled as reminder \d+ for /);
    // The re-run: the provider's call id is new, the call's place in the turn is not.
    const again = await tool.run(input, { ...ctx({ step: 0, index: 0 }), callId: 'call-b' });
    expect(idOf(again)).toBe(idOf(first));
    expect((await store.pending('tg:chat-1')).map((r) => r.text)).toEqual(['drink some water']);

    // The same call made again later in the turn, or for another message, is another reminder.
    const later = await tool.run(input, ctx({ step: 1, index: 0 }));
    const other = await tool.run(input, { ...ctx({ step: 0, index: 0 }), message: userMessage('tg', 'and again') });
    expect(new Set([idOf(first), idOf(later), idOf(other)]).size).toBe(3);
    expect(await store.pendingCount()).toBe(3);
  });

  it('/remind handled again for the same message stores one reminder, and a full conversation still answers the re-run', async () => {
    const store = new ReminderStore(openDb(':memory:'));
    const remind = reminderDefinition(store, () => {}).commands!.find((c) => c.name === 'remind')!;
    const turn = (text: string, messageId: string) => ({ message: userMessage('tg', text, { messageId }), scope: 'tg:chat-1' }) as unknown as TurnContext;

    const first = await remind.handler(turn('/remind in 1h stand up', 'm-1'), 'in 1h stand up');
    expect(first).toMatch(/^Reminder \d+ set for .+: stand up$/);
    expect(idOf(await remind.handler(turn('/remind in 1h stand up', 'm-1'), 'in 1h stand up'))).toBe(idOf(first));
    expect(await store.pendingCount()).toBe(1);

    // Filled up by other messages; the first message's re-run still finds its reminder.
    for (let i = 2; i <= REMINDER_LIMITS.perConversation; i++) await remind.handler(turn(`/remind in 1h r${i}`, `m-${i}`), `in 1h r${i}`);
    expect(await store.pendingCount()).toBe(REMINDER_LIMITS.perConversation);
    expect(await remind.handler(turn('/remind in 1h one more', 'm-new'), 'in 1h one more')).toMatch(/already has/);
    expect(idOf(await remind.handler(turn('/remind in 1h stand up', 'm-1'), 'in 1h stand up'))).toBe(idOf(first));
    expect(await store.pendingCount()).toBe(REMINDER_LIMITS.perConversation);
  });
});
