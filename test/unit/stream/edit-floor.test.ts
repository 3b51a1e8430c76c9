import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RecordingAdapter } from '../../helpers/recording-adapter.js';
import { streamOn } from '../../helpers/reply-stream.js';

describe('ReplyStream edit interval', () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());

  // Text keeps arriving every 20 ms, so an edit is always due: only the clamp to the platform
  // floor keeps the drafts 1 s apart when the channel asks for 10 ms.
  it('an edit_interval_ms below the platform floor is raised to the floor', async () => {
    const a = new RecordingAdapter('t', { minEditIntervalMs: 1000 });
    const s = streamOn(a, { editIntervalMs: 10 });
    for (let i = 0; i < 100; i++) {
      s.push({ type: 'text_delta', text: `w${i} ` });
      await vi.advanceTimersByTimeAsync(20);
    }
    const drafts = a.calls.filter((c) => c.op !== 'typing');
    expect(drafts.length).toBeGreaterThan(1);
    for (let i = 1; i < drafts.length; i++) expect(drafts[i]!.at - drafts[i - 1]!.at).toBeGreaterThanOrEqual(1000);
    s.push({ type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } });
    await vi.runAllTimersAsync();
    await s.finished();
  });
});

describe("ReplyStream: a final edit's floor", () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());

  /**
   * Every call takes 300 ms to be answered. Text at 0 (the first message, answered at 300),
   * at 500 (a draft edit once 1 s has passed since that answer: it goes at 1,300 and is
   * answered at 1,600) and at 1,700 with the end: the final edit waits for the platform's
   * 1 s floor after the draft edit.
   */
  async function finalEditAfter(stampsSent: boolean): Promise<{ draft: number; final: number; draftAfterFirstAnswer: number }> {
    const a = new RecordingAdapter('t', { minEditIntervalMs: 1000 }, { stampsSent });
    a.latency = () => new Promise((r) => setTimeout(r, 300));
    const s = streamOn(a, { editIntervalMs: 1000 });
    s.push({ type: 'text_delta', text: 'one ' });
    await vi.advanceTimersByTimeAsync(500);
    s.push({ type: 'text_delta', text: 'two ' });
    await vi.advanceTimersByTimeAsync(1200);
    s.push({ type: 'text_delta', text: 'three' });
    s.push({ type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } });
    await vi.runAllTimersAsync();
    await s.finished();
    const [first, draft, final] = a.calls.filter((c) => c.op === 'send' || c.op === 'edit');
    expect([first?.op, draft?.op, final?.op]).toEqual(['send', 'edit', 'edit']);
    expect(final!.text).toBe('one two three');
    return { draft: draft!.startedAt, final: final!.startedAt, draftAfterFirstAnswer: draft!.startedAt - first!.at };
  }

  it('counts from when the last edit went out, where the transport can tell: the platform counts requests as they reach it', async () => {
    const t = await finalEditAfter(true);
    expect(t.final - t.draft).toBe(1000);
    // The drafts' interval still counts from the answer.
    expect(t.draftAfterFirstAnswer).toBe(1000);
  });

  it('counts from the answer where the transport cannot tell', async () => {
    const t = await finalEditAfter(false);
    expect(t.final - t.draft).toBe(1300);
    expect(t.draftAfterFirstAnswer).toBe(1000);
  });
});

describe('ReplyStream: a step with nothing new to show', () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());

  /**
   * The first message goes at 0; the loop's next slot (1,000) finds nothing new and sends
   * nothing; text comes again at 1,500 after a pause (a tool call, a slow model), with the
   * end or without it. Nothing went out since 0, so the platform's floor passed at 1,000 and
   * the edit goes at once: a slot that sent nothing is no request to count from.
   */
  async function editAfterPause(end: boolean): Promise<number> {
    const a = new RecordingAdapter('t', { minEditIntervalMs: 1000 });
    const s = streamOn(a, { editIntervalMs: 1000 });
    s.push({ type: 'text_delta', text: 'one ' });
    await vi.advanceTimersByTimeAsync(1500);
    s.push({ type: 'text_delta', text: 'two' });
    if (!end) await vi.advanceTimersByTimeAsync(1000);
    s.push({ type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } });
    await vi.runAllTimersAsync();
    await s.finished();
    const [send, ...edits] = a.calls.filter((c) => c.op === 'send' || c.op === 'edit');
    expect([send?.op, send?.at]).toEqual(['send', 0]);
    expect(edits.map((c) => [c.op, c.text])).toEqual([['edit', 'one two']]);
    return edits[0]!.at;
  }

  it('leaves the final edit to the floor of the last request that went out', async () => {
    expect(await editAfterPause(true)).toBe(1500);
  });

  it('leaves the next draft to the interval of the last request that went out', async () => {
    expect(await editAfterPause(false)).toBe(1500);
  });

  // Each look at the text splits all of it: where drafts are not edited (IRC, WhatsApp) the
  // growing last chunk shows nothing until whole, so nearly every look is empty, and a look per
  // token would cost the reply O(tokens × length). The looks stay one per interval.
  it('where drafts are not edited, looks at the text once per interval, not once per token', async () => {
    let looks = 0;
    const a = new RecordingAdapter('t', { editsDrafts: false, minEditIntervalMs: 250 });
    const split = (text: string) => {
      looks++;
      return [text];
    };
    const s = streamOn(a, { capabilities: { ...a.capabilities, split } });
    // 1,000 tokens over 20 s: 80 intervals of 250 ms.
    for (let i = 0; i < 1000; i++) {
      s.push({ type: 'text_delta', text: `w${i} ` });
      await vi.advanceTimersByTimeAsync(20);
    }
    s.push({ type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } });
    await vi.runAllTimersAsync();
    await s.finished();
    expect(looks).toBeLessThanOrEqual(100);
    expect(a.visible('c').join('')).toContain('w999');
  });
});
