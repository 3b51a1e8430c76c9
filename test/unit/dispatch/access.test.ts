import { describe, expect, it } from 'vitest';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import { waitFor } from '../../helpers/daemon.js';
import { withPipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

const NOT_ALLOWED = /^You are not allowed to talk to this bot/;

/** A reminder's firing as src/daemon/reminders.ts builds it, for the sender and kind of the turn that set it. */
const firing = (id: string, sender: ChannelMessage['sender'], kind: string, chat: string): ChannelMessage =>
  userMessage('t', `Reminder: ${id}`, {
    kind,
    messageId: `reminder:${id}:1`,
    chat: { id: chat, type: 'dm' },
    sender,
    synthetic: { kind: 'reminder', id },
  });

describe('allow_from and the firings of what a person or a schedule set', () => {
  it('a reminder a scheduled turn set passes as the schedule did; one a person set is checked again when it fires', async () => {
    const p = withPipeline('[agent]\nprovider = "echo"\necho_delay_ms = 1\n', 'allow_from = ["42"]\n');
    // Set by the schedule_message tool in the turn of schedule "tick": that firing's kind and sender.
    const bySchedule = firing('1', { id: 'schedule:tick', name: 'schedule tick', isBot: false }, 'schedule', 'c1');
    expect(await p.dispatcher.deliver(bySchedule)).toBe(true);
    // The echo streams: the message shows "Reminder: " first and is then edited to its whole text.
    await waitFor(() => p.adapter.visible('c1')[0] === 'Reminder: 1');
    expect(p.adapter.visible('c1')).toEqual(['Reminder: 1']);

    // A background tool's result coming back to that scheduled turn's conversation passes too.
    const result = userMessage('t', 'the tool returned', {
      kind: 'schedule',
      messageId: 'tool-result:k1',
      chat: { id: 'c1', type: 'dm' },
      sender: bySchedule.sender,
      synthetic: { kind: 'tool_result', id: 'k1' },
    });
    expect(await p.dispatcher.deliver(result)).toBe(true);

    // A person taken off allow_from after setting one: refused at firing, told once.
    const byPerson = firing('2', { id: '7', name: 'Bo', isBot: false }, 'telegram', 'c2');
    expect(await p.dispatcher.deliver(byPerson)).toBe(false);
    await waitFor(() => p.adapter.visible('c2').length === 1);
    expect(p.adapter.visible('c2')[0]).toMatch(NOT_ALLOWED);

    // Nor does a person's message pass by naming itself a schedule: only channeld makes firings.
    const posing = userMessage('t', 'hello', { kind: 'schedule', chat: { id: 'c3', type: 'dm' }, sender: { id: 'schedule:tick', name: 'x', isBot: false } });
    expect(await p.dispatcher.deliver(posing)).toBe(false);
    await waitFor(() => p.adapter.visible('c3').length === 1);
    expect(p.adapter.visible('c3')[0]).toMatch(NOT_ALLOWED);
    expect(p.adapter.visible('c1').filter((t) => NOT_ALLOWED.test(t))).toEqual([]);
  });
});
