import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { backoffDelayMs } from '../../../src/supervisor/backoff.js';
import type { ChannelAdapter } from '../../../src/contracts/channel.js';
import type { SupervisedChannel } from '../../../src/supervisor/channel.js';
import { Supervisor } from '../../../src/supervisor/supervisor.js';
import { createLogger } from '../../../src/observe/logger.js';
import { LogSink } from '../../helpers/daemon.js';
import { fatal, retryable, ScriptedAdapter, type Step } from '../../helpers/scripted-adapter.js';

const backoff = { initial_ms: 1000, factor: 2, max_ms: 60000, stable_ms: 300000 };

describe('backoffDelayMs (full jitter)', () => {
  it('grows by factor per attempt and is capped', () => {
    const top = () => 0.999999;
    expect(backoffDelayMs(1, backoff, top)).toBe(999);
    expect(backoffDelayMs(2, backoff, top)).toBe(1999);
    expect(backoffDelayMs(3, backoff, top)).toBe(3999);
    expect(backoffDelayMs(7, backoff, top)).toBe(59999); // 64 s ceiling capped at 60 s
    expect(backoffDelayMs(50, backoff, top)).toBe(59999);
  });

  it('jitter stays within [0, ceiling)', () => {
    for (let attempt = 1; attempt < 12; attempt++) {
      for (let i = 0; i < 200; i++) {
        const d = backoffDelayMs(attempt, backoff);
        expect(d).toBeGreaterThanOrEqual(0);
        expect(d).toBeLessThan(Math.min(60000, 1000 * 2 ** (attempt - 1)));
      }
    }
    expect(backoffDelayMs(3, backoff, () => 0)).toBe(0);
  });
});

describe('Supervisor', () => {
  let sink: LogSink;
  let sup: Supervisor;
  beforeEach(() => {
    vi.useFakeTimers({ now: new Date('2026-01-01T00:00:00Z') });
    sink = new LogSink();
    sup = new Supervisor(createLogger({ level: 'debug', destination: sink, pretty: false }));
  });
  afterEach(async () => {
    const stopping = sup.stopAll(10);
    await vi.runAllTimersAsync();
    await stopping;
    vi.useRealTimers();
  });

  const supervise = (id: string, adapter: Pick<ChannelAdapter, 'listen'>, connectTimeoutMs = 30000): SupervisedChannel =>
    sup.add({ id, kind: 'test', adapter, deliver: async () => true, backoff, connectTimeoutMs, random: () => 0.5 });
  const add = (id: string, script: Step[], extra: { connectTimeoutMs?: number } = {}) => {
    const adapter = new ScriptedAdapter(id, script);
    supervise(id, adapter, extra.connectTimeoutMs);
    return adapter;
  };
  const status = (id: string) => sup.statuses().find((s) => s.id === id)!;
  const retryInMs = (id: string) => Date.parse(status(id).next_retry_at!) - Date.now();

  it('backs off 500, 1000, 2000 ms (half the ceiling at random 0.5) then connects', async () => {
    const a = add('c', [{ kind: 'fail', error: retryable() }, { kind: 'fail', error: retryable() }, { kind: 'fail', error: retryable() }, { kind: 'connect' }]);
    await vi.advanceTimersByTimeAsync(0);
    expect(status('c')).toMatchObject({ state: 'backoff', attempts: 1, last_error: { code: 'CHANNEL_NETWORK' } });
    expect(retryInMs('c')).toBe(500);
    await vi.advanceTimersByTimeAsync(500);
    expect(status('c').attempts).toBe(2);
    expect(retryInMs('c')).toBe(1000);
    await vi.advanceTimersByTimeAsync(1000);
    expect(retryInMs('c')).toBe(2000);
    await vi.advanceTimersByTimeAsync(1999);
    expect(a.attempts).toBe(3);
    await vi.advanceTimersByTimeAsync(1);
    expect(status('c')).toMatchObject({ state: 'connected', connection: 1, attempts: 0 });
    expect(a.attempts).toBe(4);
  });

  it('caps the wait at max_ms however long it fails', async () => {
    add('c', [{ kind: 'fail', error: retryable() }]);
    await vi.advanceTimersByTimeAsync(10 * 60_000);
    // Each backoff line says when it was written and when the retry is due.
    const waits = sink.lines
      .map((l) => JSON.parse(l) as { msg: string; time: number; next_retry_at?: string })
      .filter((l) => l.msg === 'channel c backing off')
      .map((l) => Date.parse(l.next_retry_at!) - l.time);
    expect(waits.slice(0, 7)).toEqual([500, 1000, 2000, 4000, 8000, 16000, 30000]);
    expect(new Set(waits.slice(6))).toEqual(new Set([30000])); // 0.5 × the 60 s cap, from then on
  });

  it('a fatal error parks the channel in failed with its code, with no further attempts; siblings keep running', async () => {
    const bad = add('bad', [{ kind: 'fail', error: fatal('the token was refused') }]);
    add('good', [{ kind: 'connect' }]);
    await vi.advanceTimersByTimeAsync(0);
    expect(status('bad')).toMatchObject({
      state: 'failed',
      last_error: { code: 'CHANNEL_AUTH_FAILED', message: expect.stringContaining('the token was refused') },
      next_retry_at: null,
    });
    await vi.advanceTimersByTimeAsync(10 * 60_000);
    expect(bad.attempts).toBe(1);
    expect(status('good')).toMatchObject({ state: 'connected', connection: 1 });
    expect(sup.ready()).toBe(true);
  });

  it('a connect attempt that never settles times out and backs off', async () => {
    const a = add('slow', [{ kind: 'hang' }, { kind: 'connect' }], { connectTimeoutMs: 5000 });
    await vi.advanceTimersByTimeAsync(4999);
    expect(status('slow').state).toBe('starting');
    expect(sup.ready()).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(status('slow')).toMatchObject({ state: 'backoff', last_error: { code: 'CHANNEL_CONNECT_TIMEOUT' } });
    expect(sup.ready()).toBe(true);
    await vi.advanceTimersByTimeAsync(500);
    expect(a.attempts).toBe(2);
    expect(status('slow').state).toBe('connected');
  });

  it('a listener that returns on its own is restarted', async () => {
    const a = add('r', [{ kind: 'connect', thenReturnAfterMs: 100 }, { kind: 'connect' }]);
    await vi.advanceTimersByTimeAsync(100);
    expect(status('r')).toMatchObject({ state: 'backoff', last_error: { code: 'CHANNEL_ENDED' } });
    await vi.advanceTimersByTimeAsync(500);
    expect(a.attempts).toBe(2);
    expect(status('r')).toMatchObject({ state: 'connected', connection: 2 });
  });

  it('the attempt count resets after a stable run', async () => {
    const a = add('s', [
      { kind: 'fail', error: retryable() },
      { kind: 'fail', error: retryable() },
      { kind: 'connect', thenFail: { error: retryable(), afterMs: 300_000 } },
      { kind: 'fail', error: retryable() },
    ]);
    await vi.advanceTimersByTimeAsync(500 + 1000);
    expect(status('s').state).toBe('connected');
    await vi.advanceTimersByTimeAsync(300_000);
    // Back to attempt 1: the wait is half of initial_ms again, not of 8 s.
    expect(status('s')).toMatchObject({ state: 'backoff', attempts: 1 });
    expect(retryInMs('s')).toBe(500);
    await vi.advanceTimersByTimeAsync(500);
    expect(a.attempts).toBe(4);
    expect(status('s').attempts).toBe(1);
    expect(retryInMs('s')).toBe(500);
  });

  it('logs one line per backoff, not per tick, and retries start at debug level', async () => {
    const a = add('noisy', [{ kind: 'fail', error: retryable() }]);
    await vi.advanceTimersByTimeAsync(10 * 60_000);
    const lines = sink.lines.map((l) => JSON.parse(l) as { msg: string; level: number }).filter((l) => l.level >= 30);
    expect(lines.filter((l) => l.msg === 'channel noisy backing off').length).toBe(a.attempts);
    expect(lines.filter((l) => l.msg === 'channel noisy starting').length).toBe(1);
    expect(lines.length).toBe(a.attempts + 1);
  });

  it('a late onConnected from an attempt it gave up on does not show the channel connected', async () => {
    // The first attempt's SDK hangs past the connect timeout and then reports a session
    // anyway, while the supervisor is backing off before the second attempt.
    const late: Array<() => void> = [];
    let attempts = 0;
    supervise(
      'late',
      {
        listen: (_deliver, _signal, onConnected) => {
          attempts++;
          if (attempts === 1) {
            late.push(onConnected);
            return new Promise<void>(() => {});
          }
          return Promise.reject(retryable('still down'));
        },
      },
      5000,
    );
    await vi.advanceTimersByTimeAsync(5000);
    expect(status('late')).toMatchObject({ state: 'backoff', attempts: 1, last_error: { code: 'CHANNEL_CONNECT_TIMEOUT' } });
    late[0]!();
    expect(status('late')).toMatchObject({ state: 'backoff', attempts: 1, connection: 0 });
    await vi.advanceTimersByTimeAsync(500);
    expect(attempts).toBe(2);
    expect(status('late')).toMatchObject({ state: 'backoff', attempts: 2, connection: 0, last_error: { code: 'CHANNEL_NETWORK' } });
    expect(sink.lines.some((l) => (JSON.parse(l) as { msg: string }).msg === 'channel late connected')).toBe(false);
  });

  it('a stop during a long backoff wait ends the wait at once, not when the wait would have run out', async () => {
    const a = new ScriptedAdapter('slow', [{ kind: 'fail', error: retryable() }, { kind: 'connect' }]);
    const ch = sup.add({
      id: 'slow',
      kind: 'test',
      adapter: a,
      deliver: async () => true,
      backoff: { ...backoff, initial_ms: 600_000, max_ms: 600_000 },
      connectTimeoutMs: 30000,
      random: () => 0.5,
    });
    await vi.advanceTimersByTimeAsync(0);
    expect(ch.status()).toMatchObject({ state: 'backoff', attempts: 1 });
    let stopped = false;
    // A grace as long as the wait: only the wait's own abort can end the loop early.
    const p = ch.stop(600_000).then(() => (stopped = true));
    await vi.advanceTimersByTimeAsync(1);
    expect(stopped).toBe(true);
    await p;
    expect(ch.status()).toMatchObject({ state: 'stopped', next_retry_at: null });
    expect(vi.getTimerCount()).toBe(0);
    expect(a.attempts).toBe(1);
  });

  it('stop aborts the listener and marks it stopped', async () => {
    const a = new ScriptedAdapter('x', [{ kind: 'connect' }]);
    // remove() forgets the channel before stopping it: its own handle shows the end state.
    const ch = supervise('x', a);
    await vi.advanceTimersByTimeAsync(0);
    expect(ch.status().state).toBe('connected');
    expect(a.signals[0]!.aborted).toBe(false);
    const p = sup.remove('x', 1000);
    expect(sup.statuses()).toEqual([]);
    await vi.advanceTimersByTimeAsync(0);
    await p;
    expect(a.signals[0]!.aborted).toBe(true);
    expect(a.settled).toBe(1);
    expect(ch.status()).toMatchObject({ state: 'stopped', next_retry_at: null });
    expect(sink.lines.filter((l) => (JSON.parse(l) as { msg: string }).msg === 'channel x stopped')).toHaveLength(1);
    // No restart after a stop, however long one waits.
    await vi.advanceTimersByTimeAsync(10 * 60_000);
    expect(a.attempts).toBe(1);
  });
});
