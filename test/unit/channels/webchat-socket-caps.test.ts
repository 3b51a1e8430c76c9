import { PassThrough } from 'node:stream';
import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SocketLimit } from '../../../channels/webchat/socket-caps.js';

/** A SocketLimit with a tab cap of 1, its warnings collected, and the channel run's controller. */
function limit() {
  const warnings: Array<{ refused: number; reason: string }> = [];
  const log = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line)) });
  const run = new AbortController();
  return { limit: new SocketLimit({ perTab: 1, total: 10 }, log, 'web', run.signal), warnings, run };
}

describe('web chat socket caps: how refusals are reported', () => {
  afterEach(() => vi.useRealTimers());

  it('refusals after a warning are reported once that minute is over, without waiting for another refusal', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const { limit: l, warnings } = limit();
    expect(l.admit(new PassThrough(), 0, 0)).toBe(true);
    expect(l.admit(new PassThrough(), 1, 1)).toBe(false);
    expect(warnings.map((w) => w.refused)).toEqual([1]);
    for (let i = 0; i < 3; i++) expect(l.admit(new PassThrough(), 1, 1)).toBe(false);
    vi.advanceTimersByTime(59_000);
    expect(warnings.map((w) => w.refused)).toEqual([1]);
    vi.advanceTimersByTime(1_000);
    expect(warnings).toMatchObject([{ refused: 1 }, { refused: 3, reason: 'a tab may hold 1 connections at once' }]);
    // Nothing refused since: no empty report, no timer left.
    vi.advanceTimersByTime(120_000);
    expect(warnings).toHaveLength(2);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('refusals not yet reported when the channel stops are reported then, and the timer is cleared', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const { limit: l, warnings, run } = limit();
    l.admit(new PassThrough(), 1, 1);
    l.admit(new PassThrough(), 1, 1);
    expect(vi.getTimerCount()).toBe(1);
    run.abort();
    expect(warnings.map((w) => w.refused)).toEqual([1, 1]);
    expect(vi.getTimerCount()).toBe(0);
    // A handshake refused while the channel's routes are being taken down is reported at once.
    l.admit(new PassThrough(), 1, 1);
    expect(warnings.map((w) => w.refused)).toEqual([1, 1, 1]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a clock stepped back after a warning delays the next report by a minute at most', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const { limit: l, warnings } = limit();
    l.admit(new PassThrough(), 1, 1);
    vi.setSystemTime(Date.now() - 3_600_000);
    l.admit(new PassThrough(), 1, 1);
    vi.advanceTimersByTime(60_000);
    expect(warnings.map((w) => w.refused)).toEqual([1, 1]);
  });

  it('a refused handshake is answered 429 with Retry-After before any upgrade', async () => {
    const { limit: l } = limit();
    const socket = new PassThrough();
    l.admit(socket, 1, 1);
    expect(String(socket.read())).toMatch(/^HTTP\/1\.1 429 Too Many Requests\r\n[\s\S]*Retry-After: 10\r\n/);
  });
});
