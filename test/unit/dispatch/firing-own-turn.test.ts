import { describe, expect, it } from 'vitest';
import type { QueueMode } from '../../../src/config/schema.js';
import type { InboxItem } from '../../../src/inbox/item.js';
import { ItemLifecycle } from '../../../src/inbox/lifecycle.js';
import { Lanes, type TurnJob } from '../../../src/dispatch/lanes.js';
import { createLogger } from '../../../src/observe/logger.js';
import { waitFor } from '../../helpers/daemon.js';
import { pipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

// A reminder's or a schedule's firing is its own turn. Collected with users' messages, its hook
// posted their text as the reminder; in interrupt mode it cut a user's answer and dropped the
// queue, and a user's message cut it; refused at max_queued, the firing was lost (marked fired).

/** Lanes whose turns wait for `release()`; `turns` lists each turn's texts and how it ended. */
function lanesWith(config: string) {
  const p = pipeline(`${config}[agent]\nprovider = "echo"\n`);
  const turns: Array<{ texts: string[]; ended: string }> = [];
  const gates = new Map<object, () => void>();
  const lanes = new Lanes({
    limits: () => p.config.limits,
    channelLimit: () => undefined,
    execute: async (job: TurnJob, signal: AbortSignal) => {
      const turn = { texts: job.items.map((i) => i.message.text), ended: 'running' };
      turns.push(turn);
      const ended = await new Promise<'done' | 'cancelled'>((r) => {
        gates.set(turn, () => r('done'));
        signal.addEventListener('abort', () => r('cancelled'), { once: true });
      });
      gates.delete(turn);
      turn.ended = ended;
      return ended;
    },
    lifecycle: new ItemLifecycle(p.inbox),
    log: createLogger({ level: 'silent' }),
  });
  const item = (text: string, kind?: 'reminder' | 'schedule'): InboxItem => {
    const message = userMessage('t', text, kind ? { synthetic: { kind, id: `${kind}-1` } } : {});
    return { id: p.inbox.add(message, 't:chat-1')!, scope: 't:chat-1', message, state: 'pending', replyRefs: [] };
  };
  /** Ends the running turn and waits for the next to start (or none to run). */
  const next = async () => {
    const before = turns.length;
    const [end] = gates.values();
    end!();
    await waitFor(() => turns.length > before || lanes.snapshot().inFlight === 0);
  };
  return { p, lanes, turns, item, next, settle: () => waitFor(() => lanes.snapshot().inFlight === 0 && lanes.snapshot().queued === 0) };
}

describe("a reminder's or a schedule's firing", () => {
  it('is not collected with the messages around it: each side is its own turn', async () => {
    const l = lanesWith('[limits]\ncollect_debounce_ms = 0\n');
    try {
      const accept = (text: string, kind?: 'reminder') => expect(l.lanes.accept(l.item(text, kind), 'collect' as QueueMode, [])).toBe(true);
      accept('first');
      await waitFor(() => l.turns.length === 1);
      accept('tide at noon?');
      accept('Reminder: water the plants', 'reminder');
      accept('and the wind?');
      accept('and the rain?');
      while (l.turns.length < 4) await l.next();
      await l.next();
      await l.settle();
      expect(l.turns.map((t) => t.texts)).toEqual([['first'], ['tide at noon?'], ['Reminder: water the plants'], ['and the wind?', 'and the rain?']]);
    } finally {
      await l.p.close();
    }
  });

  it('in interrupt mode, neither cuts nor drops a user answer, nor is cut or dropped by one', async () => {
    const l = lanesWith('');
    try {
      const accept = (text: string, kind?: 'schedule') => expect(l.lanes.accept(l.item(text, kind), 'interrupt', [])).toBe(true);
      accept('a long answer');
      await waitFor(() => l.turns.length === 1);
      accept('Daily report', 'schedule');
      accept('newer question');
      // The newer question cut the running answer; the firing queued before it stayed.
      await waitFor(() => l.turns.length === 2);
      expect(l.turns[0]).toEqual({ texts: ['a long answer'], ended: 'cancelled' });
      expect(l.turns[1]!.texts).toEqual(['Daily report']);
      // A user message while the firing runs waits for it.
      accept('one more');
      await l.next();
      await waitFor(() => l.turns.length === 3);
      expect(l.turns[1]!.ended).toBe('done');
      await l.next();
      await waitFor(() => l.turns.length === 4);
      await l.next();
      await l.settle();
      expect(l.turns.map((t) => t.texts)).toEqual([['a long answer'], ['Daily report'], ['newer question'], ['one more']]);
    } finally {
      await l.p.close();
    }
  });

  it('is queued past max_queued, where a user message is refused', async () => {
    const l = lanesWith('[limits]\nmax_queued = 1\n');
    try {
      expect(l.lanes.accept(l.item('running'), 'followup', [])).toBe(true);
      await waitFor(() => l.turns.length === 1);
      expect(l.lanes.accept(l.item('queued'), 'followup', [])).toBe(true);
      expect(l.lanes.accept(l.item('refused'), 'followup', [])).toBe(false);
      expect(l.lanes.accept(l.item('Reminder: call back', 'reminder'), 'followup', [])).toBe(true);
      while (l.turns.length < 3) await l.next();
      await l.next();
      await l.settle();
      expect(l.turns.map((t) => t.texts)).toEqual([['running'], ['queued'], ['Reminder: call back']]);
    } finally {
      await l.p.close();
    }
  });
});
