import { describe, expect, it } from 'vitest';
import { Upgrades } from '../../../src/daemon/upgrade/service.js';
import { createLogger } from '../../../src/observe/logger.js';
import { LogSink, waitFor } from '../../helpers/daemon.js';
import { linkedSuccessor } from '../../helpers/upgrade.js';

describe('upgrade: a process started by an upgrade refuses another until its hand-over finished', () => {
  // A third process started while this one still held back the old one's conversations
  // (their turns still running there) knew of neither, and answered the same message again.
  it('refuses (coded, logged) before it is ready and while the old process still runs turns; accepts once they ended', async () => {
    const { successor, sent, fromOld } = linkedSuccessor();
    const sink = new LogSink();
    let tracked = 0;
    const waiting: Array<ReadonlySet<string>> = [];
    const u = new Upgrades(
      {
        log: createLogger({ level: 'debug', destination: sink, pretty: false }),
        timeoutMs: () => 1000,
        cluster: false,
        // No socket to hand over: an upgrade that is not refused fails at once, starting nothing.
        http: { listeningFd: () => undefined, stopAccepting: () => {}, drained: async () => {} },
        dispatcher: {
          freeze: () => [],
          deferTurns: () => {},
          resumeTurns: (w) => (waiting.push(w ?? new Set()), 0),
          trackAdmissions: () => void tracked++,
          recoverUnheld: () => 0,
        },
        storage: { flush: () => {}, status: () => ({ pending_writes: 0 }) },
        inbox: { unfinished: () => [] },
        reloading: () => false,
      },
      successor,
    );
    const ready = u.ready();
    await waitFor(() => sent.some((m) => m.t === 'ready'));
    expect(u.tookOver).toBe(false);
    const before = await u.predecessor.upgrade();
    expect(before).toMatchObject({ ok: false, code: 'UPGRADE_IN_PROGRESS' });
    expect(before.error).toMatch(/hand-over has not finished/);

    fromOld({ t: 'frozen', busy: ['tg:42'] });
    await waitFor(() => waiting.length === 1);
    expect([...waiting[0]!]).toEqual(['tg:42']);
    // The old process froze: the run files this one wrote are its own from now on.
    expect(u.tookOver).toBe(true);
    // tg:42's turn still runs in the old process, held back here: a new upgrade must wait.
    expect(await u.predecessor.upgrade()).toMatchObject({ ok: false, code: 'UPGRADE_IN_PROGRESS' });
    expect(tracked).toBe(0);
    const refusals = sink.entries().filter((e) => e.msg === 'upgrade refused');
    expect(refusals).toHaveLength(2);
    expect(refusals[0]).toMatchObject({ code: 'UPGRADE_IN_PROGRESS' });

    fromOld({ t: 'done' });
    await ready;
    // Not refused any more: it goes on and fails here only because the test has no socket.
    expect(await u.predecessor.upgrade()).toMatchObject({ ok: false, code: 'UPGRADE_FAILED' });
  });

  // A failed upgrade's old process closes the channel as it stops the new one: read as the
  // old process gone, the new one took over (ran turns, kept the run files) though the old
  // one serves on.
  it('after `abort` the channel closing is not the old process gone: nothing is taken over', async () => {
    const { successor, fromOld, gone } = linkedSuccessor();
    let frozen = false;
    void successor.frozen.then(() => (frozen = true));
    const taken = successor.take('tg');
    fromOld({ t: 'abort' });
    gone();
    // A listener asked for is not held up (its process is being stopped anyway).
    expect(await taken).toBeUndefined();
    await new Promise((r) => setImmediate(r));
    expect(frozen).toBe(false);
  });
});
