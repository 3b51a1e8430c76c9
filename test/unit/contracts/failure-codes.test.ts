import { describe, expect, it } from 'vitest';
import type { InboxItem } from '../../../src/inbox/item.js';
import { ItemLifecycle } from '../../../src/inbox/lifecycle.js';
import { ManagementSlot } from '../../../src/daemon/management.js';
import { Lanes } from '../../../src/dispatch/lanes.js';
import { Kernel } from '../../../src/kernel/kernel.js';
import { createLogger } from '../../../src/observe/logger.js';
import { waitFor } from '../../helpers/daemon.js';
import { pipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

/** Failures that used to share DAEMON_SHUTTING_DOWN each have their own code (issue: one code per failure). */
describe('one code per failure', () => {
  it('a management call before the management component bound is MANAGEMENT_UNBOUND', () => {
    expect(() => new ManagementSlot().turns()).toThrow(expect.objectContaining({ code: 'MANAGEMENT_UNBOUND', retryable: true }));
  });

  it("an unloading component's signal aborts with COMPONENT_UNLOADING", async () => {
    let signal: AbortSignal | undefined;
    const k = new Kernel();
    await k.load({ name: 'p', start: (ctx) => void (signal = ctx.signal) });
    await k.unload('p');
    expect(signal?.reason).toMatchObject({ code: 'COMPONENT_UNLOADING' });
  });

  it('a message for a channel the dispatcher does not know is CHANNEL_UNKNOWN, retryable from the catalogue', async () => {
    const p = pipeline(`[agent]\nprovider = "echo"\n`);
    try {
      await expect(p.dispatcher.deliver(userMessage('nope', 'hello'))).rejects.toMatchObject({ code: 'CHANNEL_UNKNOWN', retryable: true });
    } finally {
      await p.close();
    }
  });

  it('a turn cut by a newer message is TURN_INTERRUPTED, by the operator TURN_STOPPED, by the drain DAEMON_SHUTTING_DOWN', async () => {
    const p = pipeline(`[agent]\nprovider = "echo"\n`);
    try {
      const signals: AbortSignal[] = [];
      const lanes = new Lanes({
        limits: () => p.config.limits,
        channelLimit: () => undefined,
        // A turn that runs until it is cut.
        execute: (_job, signal) => {
          signals.push(signal);
          return new Promise((resolve) => signal.addEventListener('abort', () => resolve('cancelled'), { once: true }));
        },
        lifecycle: new ItemLifecycle(p.inbox),
        log: createLogger({ level: 'silent' }),
      });
      const item = (text: string): InboxItem => {
        const message = userMessage('t', text);
        return { id: p.inbox.add(message, 't:chat-1')!, scope: 't:chat-1', message, state: 'pending', replyRefs: [] };
      };
      lanes.accept(item('one'), 'interrupt', []);
      await waitFor(() => signals.length === 1);
      const second = item('two');
      lanes.accept(second, 'interrupt', []);
      expect(signals[0]!.reason).toMatchObject({ code: 'TURN_INTERRUPTED' });
      await waitFor(() => signals.length === 2);
      expect(lanes.stopTurn(String(second.id))).toBe('cancelled');
      expect(signals[1]!.reason).toMatchObject({ code: 'TURN_STOPPED' });
      lanes.accept(item('three'), 'interrupt', []);
      await waitFor(() => signals.length === 3);
      await lanes.drain(0, new AbortController().signal);
      expect(signals[2]!.reason).toMatchObject({ code: 'DAEMON_SHUTTING_DOWN' });
    } finally {
      await p.close();
    }
  });
});
