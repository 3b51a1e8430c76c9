import { describe, expect, it } from 'vitest';
import { CodedError } from '../../../src/contracts/errors.js';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import { HELD_REPLY, IntakeHold, NOT_KEPT_REPLY, type Held } from '../../../src/dispatch/hold.js';
import { quietLogger } from '../../helpers/cluster.js';
import { waitFor } from '../../helpers/daemon.js';
import { userMessage } from '../../helpers/recording-adapter.js';

/** A hold over a "store" the test opens and closes; what it stored, in order. */
function setup(limits = { messages: 10, bytes: 1_000_000 }, syntheticWindowMs = 60_000) {
  let open = false;
  const stored: string[] = [];
  const notices: Array<{ text: string; notice: string }> = [];
  const counts = new Map<string, number>();
  const hold = new IntakeHold<string>({
    limits: () => limits,
    write: async (batch: readonly Held[]) =>
      batch.map((h) =>
        open
          ? { status: 'fulfilled' as const, value: h.msg.text }
          : { status: 'rejected' as const, reason: new CodedError('STORAGE_UNAVAILABLE', 'closed', { retryable: true }) },
      ),
    stored: (_h, text) => stored.push(text),
    holdable: (err) => err instanceof CodedError && err.code === 'STORAGE_UNAVAILABLE',
    syntheticWindowMs: () => syntheticWindowMs,
    notify: (msg, notice) => notices.push({ text: msg.text, notice }),
    counted: (id, n) => counts.set(id, n),
    log: quietLogger().log,
  });
  return { hold, stored, notices, counts, open: () => (open = true) };
}

const msg = (text: string, over: Partial<ChannelMessage> = {}) => userMessage('c', text, over);

describe('IntakeHold', () => {
  it('stores held messages in arrival order once the store takes them; a redelivery waits on the same entry', async () => {
    const s = setup();
    const a = msg('a');
    const first = s.hold.hold(a, 'c:1', [], 'test');
    const again = s.hold.hold({ ...a }, 'c:1', [], 'test');
    const b = s.hold.hold(msg('b'), 'c:1', [], 'test');
    expect(s.hold.count('c')).toBe(2);
    expect(s.hold.holding('c')).toBe(true);
    s.open();
    expect(await Promise.all([first, again, b])).toEqual([true, true, true]);
    expect(s.stored).toEqual(['a', 'b']);
    await waitFor(() => !s.hold.holding('c'));
    expect(s.counts.get('c')).toBe(0);
  });

  it('past the bound a message is refused (STORAGE_UNAVAILABLE) and its conversation is told once that it was not kept', async () => {
    const s = setup({ messages: 1, bytes: 1_000_000 });
    const kept = s.hold.hold(msg('kept'), 'c:1', [], 'test');
    await expect(s.hold.hold(msg('x'), 'c:1', [], 'test')).rejects.toMatchObject({ code: 'STORAGE_UNAVAILABLE', retryable: true });
    await expect(s.hold.hold(msg('y'), 'c:1', [], 'test')).rejects.toMatchObject({ code: 'STORAGE_UNAVAILABLE' });
    expect(s.notices).toEqual([{ text: 'x', notice: NOT_KEPT_REPLY }]);
    s.open();
    expect(await kept).toBe(true);
    expect(s.stored).toEqual(['kept']);
  });

  it('a conversation whose message waited is told once, however many it sends', async () => {
    const s = setup();
    const all = ['1', '2', '3'].map((t) => s.hold.hold(msg(t), 'c:1', [], 'test'));
    const other = s.hold.hold(msg('o', { chat: { id: 'chat-2', type: 'dm' } }), 'c:2', [], 'test');
    await waitFor(() => s.notices.length === 2, 10_000);
    expect(s.notices.map((n) => n.notice)).toEqual([HELD_REPLY, HELD_REPLY]);
    s.open();
    await Promise.all([...all, other]);
    expect(s.notices).toHaveLength(2);
  });

  it('release lets the waiting deliver calls go but keeps the messages (changed channel), or drops them (removed); close loses what is left', async () => {
    const s = setup();
    const kept = s.hold.hold(msg('kept'), 'c:1', [], 'test');
    s.hold.release('c', false);
    await expect(kept).rejects.toMatchObject({ code: 'CHANNEL_STOPPING', retryable: true });
    expect(s.hold.count('c')).toBe(1);
    const other = userMessage('d', 'dropped');
    void s.hold.hold(other, 'd:1', [], 'test').catch(() => {});
    s.hold.release('d', true);
    expect(s.hold.count('d')).toBe(0);
    expect(await s.hold.close()).toBe(1);
    expect(s.stored).toEqual([]);
    await expect(s.hold.hold(msg('late'), 'c:1', [], 'test')).rejects.toMatchObject({ code: 'DAEMON_SHUTTING_DOWN' });
  });

  it('a firing held past the duplicate window is let go (FIRING_EXPIRED, never stored, nobody told); the user messages around it are kept in order', async () => {
    const windowMs = 400;
    const s = setup({ messages: 10, bytes: 1_000_000 }, windowMs);
    const firing = (text: string, ageMs: number) =>
      msg(text, { messageId: `schedule:${text}`, receivedAt: Date.now() - ageMs, synthetic: { kind: 'schedule', id: text } });
    const before = s.hold.hold(msg('before'), 'c:1', [], 'test');
    const late = s.hold.hold(firing('late', windowMs - 150), 'c:1', [], 'test');
    const after = s.hold.hold(msg('after'), 'c:1', [], 'test');
    await expect(late).rejects.toMatchObject({ code: 'FIRING_EXPIRED', retryable: true });
    expect(s.hold.count('c')).toBe(2);
    // A redelivery of an expired firing is a new entry, checked again at once.
    const again = s.hold.hold(firing('late', windowMs + 10), 'c:1', [], 'test');
    await expect(again).rejects.toMatchObject({ code: 'FIRING_EXPIRED' });
    s.open();
    expect(await Promise.all([before, after])).toEqual([true, true]);
    expect(s.stored).toEqual(['before', 'after']);
    // Held long enough for the notice: the user's conversation is told, the firing's is not.
    const fresh = setup({ messages: 2, bytes: 1_000_000 }, 60_000);
    const held = fresh.hold.hold(firing('held', 0), 'c:2', [], 'test');
    const user = fresh.hold.hold(msg('user', { chat: { id: 'chat-3', type: 'dm' } }), 'c:3', [], 'test');
    await expect(fresh.hold.hold(firing('over', 0), 'c:2', [], 'test')).rejects.toMatchObject({ code: 'STORAGE_UNAVAILABLE' });
    await waitFor(() => fresh.notices.length > 0, 10_000);
    expect(fresh.notices).toEqual([{ text: 'user', notice: HELD_REPLY }]);
    fresh.open();
    expect(await Promise.all([held, user])).toEqual([true, true]);
    expect(fresh.stored).toEqual(['held', 'user']);
    expect(fresh.notices).toHaveLength(1);
  });

  it('close writes no firing that is past the duplicate window', async () => {
    const s = setup({ messages: 10, bytes: 1_000_000 }, 50);
    const firingAt = Date.now();
    const firing = s.hold.hold(msg('f', { messageId: 'reminder:1:1', receivedAt: firingAt, synthetic: { kind: 'reminder', id: '1' } }), 'c:1', [], 'test');
    const user = s.hold.hold(msg('u'), 'c:1', [], 'test');
    // Past its window while the store still refuses: close's last write must leave it out.
    await waitFor(() => Date.now() - 50 > firingAt);
    s.open();
    await s.hold.close();
    await expect(firing).rejects.toMatchObject({ code: 'FIRING_EXPIRED' });
    expect(await user).toBe(true);
    expect(s.stored).toEqual(['u']);
  });
});
