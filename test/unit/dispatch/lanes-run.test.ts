import { describe, expect, it } from 'vitest';
import type { TurnEndingKind } from '../../../src/contracts/agent-events.js';
import type { InboxItem } from '../../../src/inbox/item.js';
import { ItemLifecycle } from '../../../src/inbox/lifecycle.js';
import { Lanes, type TurnJob } from '../../../src/dispatch/lanes.js';
import { createLogger } from '../../../src/observe/logger.js';
import { waitFor } from '../../helpers/daemon.js';
import { pipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

/** Lanes over a real inbox, with the given executor and lifecycle; log lines are kept. */
function lanesWith(execute: (job: TurnJob) => Promise<TurnEndingKind>, lifecycle?: (p: ReturnType<typeof pipeline>) => ItemLifecycle) {
  const p = pipeline(`[agent]\nprovider = "echo"\n`);
  const lines: string[] = [];
  const lanes = new Lanes({
    limits: () => p.config.limits,
    channelLimit: () => undefined,
    execute,
    lifecycle: lifecycle?.(p) ?? new ItemLifecycle(p.inbox),
    log: createLogger({ level: 'info', destination: { write: (line: string) => void lines.push(line) } }),
  });
  const item = (text: string): InboxItem => {
    const message = userMessage('t', text);
    return { id: p.inbox.add(message, 't:chat-1')!, scope: 't:chat-1', message, state: 'pending', replyRefs: [] };
  };
  const stateOf = (it: InboxItem) => (p.db.prepare('SELECT state FROM inbox WHERE id = ?').get(it.id) as { state: string }).state;
  return { p, lanes, lines, item, stateOf };
}

describe('a turn that fails outside the runtime', () => {
  // Throwing at once used to escape from `accept` and keep the slot taken for good.
  it.each([
    [
      'throws before its first await',
      (): Promise<TurnEndingKind> => {
        throw new Error('executor broke at once');
      },
    ],
    ['rejects', (): Promise<TurnEndingKind> => Promise.reject(new Error('executor broke'))],
  ])('an executor that %s fails the item, frees the lane and its slot, and the next message runs', async (_how, fail) => {
    const ran: string[] = [];
    const { p, lanes, lines, item, stateOf } = lanesWith((job) => {
      ran.push(job.text);
      return job.text === 'one' ? fail() : Promise.resolve('done');
    });
    try {
      const [one, two] = [item('one'), item('two')];
      // Neither acceptance throws: the failure stays the turn's.
      expect(lanes.accept(one, 'followup', [])).toBe(true);
      expect(lanes.accept(two, 'followup', [])).toBe(true);
      await waitFor(() => stateOf(two) === 'done');
      expect(ran).toEqual(['one', 'two']);
      expect(stateOf(one)).toBe('failed');
      expect(lines.join('')).toContain('turn failed outside the runtime');
      expect(lanes.snapshot().inFlight).toBe(0);
    } finally {
      await p.close();
    }
  });

  it('a conversation whose every turn throws at once goes through its whole queue, one turn after another', async () => {
    let running = 0;
    let most = 0;
    const { p, lanes, item, stateOf } = lanesWith(() => {
      most = Math.max(most, ++running);
      // Each end is recorded after an await: were it freed from inside the start, the next turn
      // would start before this call returned (and a long queue would nest that deep).
      queueMicrotask(() => running--);
      throw new Error('executor broke at once');
    });
    try {
      const items = Array.from({ length: 200 }, (_, i) => item(`m${i}`)); // under max_queued (256)
      for (const it of items) expect(lanes.accept(it, 'followup', [])).toBe(true);
      await waitFor(() => stateOf(items.at(-1)!) === 'failed');
      expect(items.every((it) => stateOf(it) === 'failed')).toBe(true);
      expect(most).toBe(1);
      expect(lanes.snapshot()).toMatchObject({ inFlight: 0, queued: 0 });
    } finally {
      await p.close();
    }
  });

  it('an end that cannot be recorded is logged, and the slot is freed all the same', async () => {
    let finishing = 0;
    const { p, lanes, lines, item } = lanesWith(
      () => Promise.resolve('done'),
      (pl) =>
        new (class extends ItemLifecycle {
          override finished(): void {
            finishing++;
            throw new Error('store gone');
          }
        })(pl.inbox),
    );
    try {
      lanes.accept(item('one'), 'followup', []);
      lanes.accept(item('two'), 'followup', []);
      await waitFor(() => finishing === 2 && lanes.snapshot().inFlight === 0);
      expect(lines.filter((l) => l.includes('the end of a turn could not be recorded'))).toHaveLength(2);
    } finally {
      await p.close();
    }
  });
});
