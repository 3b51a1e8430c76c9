import { describe, expect, it } from 'vitest';
import { ManagementSlot } from '../../../src/daemon/management.js';
import { Kernel } from '../../../src/kernel/kernel.js';
import { pipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

/** Failures that used to share DAEMON_SHUTTING_DOWN each have their own code (issue: one code per failure). */
describe('one code per failure', () => {
  it('a management call before the management plugin bound is MANAGEMENT_UNBOUND', () => {
    expect(() => new ManagementSlot().turns()).toThrow(expect.objectContaining({ code: 'MANAGEMENT_UNBOUND', retryable: true }));
  });

  it("an unloading plugin's signal aborts with PLUGIN_UNLOADING", async () => {
    let signal: AbortSignal | undefined;
    const k = new Kernel();
    await k.load({ name: 'p', start: (ctx) => void (signal = ctx.signal) });
    await k.unload('p');
    expect(signal?.reason).toMatchObject({ code: 'PLUGIN_UNLOADING' });
  });

  it('a message for a channel the dispatcher does not know is CHANNEL_UNKNOWN, retryable from the catalogue', async () => {
    const p = pipeline(`[agent]\nprovider = "echo"\n`);
    try {
      await expect(p.dispatcher.deliver(userMessage('nope', 'hello'))).rejects.toMatchObject({ code: 'CHANNEL_UNKNOWN', retryable: true });
    } finally {
      await p.close();
    }
  });
});
