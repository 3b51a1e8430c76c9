import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { linkAbort, unlinkAbort } from '../../../src/util/linked-abort.js';

describe('linkAbort', () => {
  it("aborts every linked controller with the source's reason, with one listener on the source however many are linked", () => {
    const source = new AbortController();
    const linked = Array.from({ length: 100 }, () => new AbortController());
    for (const c of linked) linkAbort(source.signal, c);
    expect(getEventListeners(source.signal, 'abort')).toHaveLength(1);
    const reason = new Error('hard stop');
    source.abort(reason);
    for (const c of linked) expect(c.signal.reason).toBe(reason);
    expect(getEventListeners(source.signal, 'abort')).toHaveLength(0);
  });

  it('leaves an unlinked controller alone, and unlinking twice or one never linked is harmless', () => {
    const source = new AbortController();
    const kept = new AbortController();
    const gone = new AbortController();
    linkAbort(source.signal, kept);
    linkAbort(source.signal, gone);
    unlinkAbort(source.signal, gone);
    unlinkAbort(source.signal, gone);
    unlinkAbort(source.signal, new AbortController());
    source.abort();
    expect(kept.signal.aborted).toBe(true);
    expect(gone.signal.aborted).toBe(false);
  });

  it('aborts at once against a source that already aborted, and links nothing', () => {
    const source = new AbortController();
    source.abort(new Error('before'));
    const late = new AbortController();
    linkAbort(source.signal, late);
    expect(late.signal.reason).toBe(source.signal.reason);
    expect(getEventListeners(source.signal, 'abort')).toHaveLength(0);
  });

  it('keeps the links of different sources apart', () => {
    const one = new AbortController();
    const two = new AbortController();
    const a = new AbortController();
    const b = new AbortController();
    linkAbort(one.signal, a);
    linkAbort(two.signal, b);
    one.abort();
    expect(a.signal.aborted).toBe(true);
    expect(b.signal.aborted).toBe(false);
  });
});
