import { afterEach, describe, expect, it, vi } from 'vitest';
import { unbuildable } from '../../../src/daemon/channels.js';
import { ChannelError, CodedError } from '../../../src/contracts/errors.js';
import { createLogger } from '../../../src/observe/logger.js';
import { createTurnExecutor, fenced } from '../../../src/workspace/execute.js';
import { NEVER_FENCED } from '../../../src/contracts/topology.js';
import type { InboxItem } from '../../../src/inbox/item.js';
import { ItemLifecycle } from '../../../src/inbox/lifecycle.js';
import { pipeline } from '../../helpers/pipeline.js';
import { RecordingAdapter, userMessage } from '../../helpers/recording-adapter.js';

describe('createTurnExecutor', () => {
  afterEach(() => void vi.useRealTimers());
  for (const [what, workspaceFor] of [
    [
      'throws',
      () => {
        throw new Error('workspace table is gone');
      },
    ],
    ['finds none', () => undefined],
  ] as const) {
    it(`ends the reply with a readable error when the workspace lookup ${what}`, async () => {
      // Fake clock: "typing is not refreshed any more" is then a fact about the next minutes,
      // checked at once, instead of a real sleep that proves nothing on a busy machine.
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
      const p = pipeline('');
      const adapter = new RecordingAdapter('t', { typing: true, typingRefreshMs: 20 });
      const channel = () => ({ config: p.config.channels[0]!, adapter });
      const execute = createTurnExecutor({
        channel,
        workspaceFor,
        metrics: p.metrics,
        log: createLogger({ level: 'error', destination: p.logs, pretty: false }),
        hardStop: new AbortController().signal,
      });
      const msg = userMessage('t', 'hello');
      const item: InboxItem = { id: p.inbox.add(msg, 't:chat-1')!, scope: 't:chat-1', message: msg, state: 'pending', replyRefs: [] };
      const lifecycle = new ItemLifecycle(p.inbox);
      lifecycle.queued(item);
      lifecycle.started([item]);
      const ending = await execute(
        {
          id: String(item.id),
          scope: 't:chat-1',
          items: [item],
          text: 'hello',
          passive: [],
          replied: (refs) => lifecycle.replied([item], refs),
          stop: () => {},
        },
        new AbortController().signal,
      );
      expect(ending).toBe('error');
      expect(adapter.visible('chat-1')).toEqual(['⚠️ Something went wrong while answering; please try again.']);
      // The error reply was recorded through the lifecycle: a re-run would edit it, not send another.
      const row = p.db.prepare('SELECT state, reply_refs FROM inbox WHERE id = ?').get(item.id) as { state: string; reply_refs: string };
      expect(row.state).toBe('running');
      expect(JSON.parse(row.reply_refs)).toHaveLength(1);
      expect(p.logs.text).toContain('the turn failed before or outside its runtime');
      // The stream ended: typing is not refreshed any more.
      const typing = adapter.calls.filter((c) => c.op === 'typing').length;
      await vi.advanceTimersByTimeAsync(60_000);
      expect(adapter.calls.filter((c) => c.op === 'typing').length).toBe(typing);
      vi.useRealTimers();
      await p.close();
    });
  }
});

describe('a channel whose adapter cannot be built', () => {
  it("keeps the coded error's code, message and cause", () => {
    const auth = new ChannelError('CHANNEL_AUTH_FAILED', 'channel "sl" has no bot token', { retryable: false });
    expect(unbuildable(auth)).toBe(auth);
    const coded = new CodedError('CHANNEL_CONFLICT', 'busy elsewhere');
    const kept = unbuildable(coded);
    expect(kept).toMatchObject({ code: 'CHANNEL_CONFLICT', message: coded.message, retryable: false, cause: coded });
    expect(kept.message.match(/\(/g)).toHaveLength(1); // one hint, not two
    const plain = unbuildable(new TypeError('boom'));
    expect(plain).toMatchObject({ code: 'CHANNEL_BUILD_FAILED', retryable: false });
  });
});

describe('fenced: the signal a turn runs under', () => {
  it('is the hard stop itself on one node (no composite signal per turn)', () => {
    const hardStop = new AbortController().signal;
    expect(fenced(hardStop, NEVER_FENCED)).toBe(hardStop);
    expect(fenced(hardStop, undefined)).toBe(hardStop);
  });

  it('aborts with a fence that can abort (cluster: the lease was lost)', () => {
    const hardStop = new AbortController();
    const fence = new AbortController();
    const signal = fenced(hardStop.signal, fence.signal);
    expect(signal.aborted).toBe(false);
    fence.abort();
    expect(signal.aborted).toBe(true);
  });
});
