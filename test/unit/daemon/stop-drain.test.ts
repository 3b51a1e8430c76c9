import { describe, expect, it } from 'vitest';
import { withDaemon } from '../../helpers/fixtures.js';

describe('Daemon.stop after an upgrade', () => {
  // After a hand-over the old process's routes answer the connections it still has until each
  // moved to the new process (Predecessor.drained). A stop that unloaded its routes first would
  // cut those connections: the drain is made to hang here, so the order is seen, not raced.
  it('keeps its routes answering until the HTTP drain ends, and only then unloads them', async () => {
    const d = await withDaemon('[[channels]]\nid = "web"\ntype = "webchat"\n');
    const predecessor = d.daemon.upgrade.predecessor;
    let reached!: () => void;
    const drainWaited = new Promise<void>((resolve) => (reached = resolve));
    let endDrain!: () => void;
    const drain = new Promise<void>((resolve) => (endDrain = resolve));
    predecessor.drained = () => {
      reached();
      return drain;
    };
    const stopping = d.stop();
    try {
      await drainWaited;
      const during = await fetch(`${d.url}/healthz`, { headers: { connection: 'close' } });
      expect(during.status).toBe(200);
      await during.body?.cancel();
    } finally {
      // Also when an expectation failed: the fixture's own stop waits for this one.
      endDrain();
    }
    await stopping;
    await expect(fetch(`${d.url}/healthz`, { headers: { connection: 'close' } })).rejects.toThrow();
  });
});
