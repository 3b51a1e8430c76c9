import { describe, expect, it } from 'vitest';
import type { MessageRef } from '../../../src/contracts/message.js';
import type { InboxItem } from '../../../src/inbox/item.js';
import { ItemLifecycle } from '../../../src/inbox/lifecycle.js';
import { Lanes, type TurnJob, type TurnRunEnding } from '../../../src/dispatch/lanes.js';
import { createLogger } from '../../../src/observe/logger.js';
import { waitFor } from '../../helpers/daemon.js';
import { pipeline, type Pipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

function lanesOf(p: Pipeline, execute: (job: TurnJob, signal: AbortSignal) => Promise<TurnRunEnding>, ends: string[]): Lanes {
  return new Lanes({
    limits: () => p.config.limits,
    channelLimit: () => undefined,
    execute,
    lifecycle: new ItemLifecycle(p.inbox, [{ finished: (_items, state) => ends.push(`finished ${state}`), interrupted: () => ends.push('interrupted') }]),
    log: createLogger({ level: 'silent' }),
  });
}

function itemOf(p: Pipeline, text: string, replyRefs: MessageRef[] = []): InboxItem {
  const message = userMessage('t', text);
  return { id: p.inbox.add(message, 't:chat-1')!, scope: 't:chat-1', message, state: 'pending', replyRefs };
}

const wayToStop = {
  '/stop': (lanes: Lanes, job: TurnJob) => expect(lanes.stopOf('t:chat-1', job.items[0]!.message.sender.id, 'stopped by /stop').cancelled).toBe(true),
  'the operator': (lanes: Lanes, job: TurnJob) => expect(lanes.stopTurn(job.id)).toBe('cancelled'),
  "the platform's Stop": (_lanes: Lanes, job: TurnJob) => job.stop('stopped by the user'),
};

describe('a stopped turn that a hard stop or a fence then cuts before its stop marker is out', () => {
  it.each(Object.keys(wayToStop) as (keyof typeof wayToStop)[])('stopped by %s, it is recorded stopped, not left to be run again in full', async (way) => {
    const p = pipeline(`[agent]\nprovider = "echo"\n`);
    const ends: string[] = [];
    let running!: (job: TurnJob) => void;
    const started = new Promise<TurnJob>((r) => (running = r));
    // As the executor does when the stop marker's final edit is still retried as the process
    // stops: the turn ends unfinished.
    const lanes = lanesOf(
      p,
      async (job, signal) => {
        running(job);
        await new Promise<void>((r) => signal.addEventListener('abort', () => r(), { once: true }));
        return 'unfinished';
      },
      ends,
    );
    try {
      const item = itemOf(p, 'a long answer');
      expect(lanes.accept(item, 'followup', [])).toBe(true);
      wayToStop[way](lanes, await started);
      await waitFor(() => ends.length === 1 && lanes.snapshot().inFlight === 0);
      expect(ends).toEqual(['finished failed']);
      expect(p.db.prepare('SELECT state, error FROM inbox WHERE id = ?').get(item.id)).toEqual({ state: 'failed', error: 'cancelled' });
    } finally {
      await p.close();
    }
  });
});

describe('interrupt mode and an item that ran before (reply refs)', () => {
  it('does not interrupt the running turn of its own batch: both are answered', async () => {
    const p = pipeline(`[agent]\nprovider = "echo"\n`);
    const ends: string[] = [];
    const turns: string[][] = [];
    let aborted = false;
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const lanes = lanesOf(
      p,
      async (job, signal) => {
        turns.push(job.items.map((i) => i.message.text));
        if (turns.length === 1) {
          signal.addEventListener('abort', () => (aborted = true), { once: true });
          await released;
        }
        return signal.aborted ? 'cancelled' : 'done';
      },
      ends,
    );
    try {
      const refs: MessageRef[] = [{ chatId: 'chat-1', messageId: 'r1' }];
      expect(lanes.accept(itemOf(p, 'high water?', refs), 'interrupt', [])).toBe(true);
      await waitFor(() => lanes.snapshot().inFlight === 1);
      // Its batch-mate, handed in after it started (a hand-over), is no newer message.
      expect(lanes.accept(itemOf(p, 'low water?', [{ ...refs[0]! }]), 'interrupt', [])).toBe(true);
      expect(aborted).toBe(false);
      release();
      await waitFor(() => ends.length === 2 && lanes.snapshot().inFlight === 0);
      expect(turns).toEqual([['high water?'], ['low water?']]);
      expect(ends).toEqual(['finished done', 'finished done']);
    } finally {
      await p.close();
    }
  });
});
