import { describe, expect, it } from 'vitest';
import { handedTabs, MAX_HANDOVER_BYTES, mergeBacklog, tabsToHandOver, type BacklogEntry } from '../../../channels/webchat/handover.js';
import { MAX_STATE_BYTES, parseToNew } from '../../../src/daemon/upgrade/protocol.js';

const tab = (n: number, text: string) => ({
  lastSeenMs: n,
  backlog: new Map<string, BacklogEntry>(
    Array.from({ length: 100 }, (_, i) => [
      i % 2 ? `bot:r${i}` : `user:u${i}`,
      i % 2 ? { from: 'bot', text, final: true } : { from: 'user', id: `u${i}`, text },
    ]),
  ),
});

describe('web chat backlogs handed over on upgrade', () => {
  it('stays under the upgrade channel bound: the most recent tabs and the newest entries go, in order', () => {
    const tabs: Array<[string, ReturnType<typeof tab>]> = Array.from({ length: 50 }, (_, n) => [`tab${n}`, tab(n, 'x'.repeat(500))]);
    const state = tabsToHandOver(tabs);
    expect(Buffer.byteLength(JSON.stringify(state))).toBeLessThanOrEqual(MAX_HANDOVER_BYTES);
    expect(MAX_HANDOVER_BYTES).toBeLessThan(MAX_STATE_BYTES);
    // Least recently used first, as the adapter keeps them; the newest tab is there whole, older ones were left out.
    expect(state.tabs.at(-1)!.id).toBe('tab49');
    expect(state.tabs.at(-1)!.backlog.at(-1)![0]).toBe('bot:r99');
    expect(state.tabs.length).toBeLessThan(50);
    // It survives the upgrade channel's check and reads back the same.
    const sent = parseToNew({ t: 'restore', channel: 'web', state });
    expect(sent).toEqual({ t: 'restore', channel: 'web', state });
    expect(handedTabs(JSON.parse(JSON.stringify(state)))).toEqual(state.tabs);
  });

  it('a malformed state gives no tabs or leaves out the malformed parts', () => {
    expect(handedTabs(null)).toEqual([]);
    expect(handedTabs({ tabs: 'x' })).toEqual([]);
    const tabs = handedTabs({
      tabs: [
        {
          id: 'a',
          lastSeenMs: 1,
          backlog: [
            ['user:1', { from: 'user', id: '1', text: 'hi' }],
            ['evil', { from: 'user', id: '2', text: 'x' }],
            ['bot:2', { from: 'bot', text: 7 }],
          ],
        },
        { id: 'x'.repeat(65), lastSeenMs: 1, backlog: [] },
      ],
    });
    expect(tabs).toEqual([{ id: 'a', lastSeenMs: 1, backlog: [['user:1', { from: 'user', id: '1', text: 'hi' }]] }]);
  });

  it('a late state merges into what the new process has: answers in their place, only what is new or changed is sent again', () => {
    const q = (id: string): [string, BacklogEntry] => [`user:${id}`, { from: 'user', id, text: `question ${id}` }];
    const r = (ref: string, text: string, final: boolean): [string, BacklogEntry] => [`bot:${ref}`, { from: 'bot', text, final }];
    // Here: the restored question and draft of 1, then question 2 sent to the new process.
    const here = new Map([q('1'), r('a', 'draft', false), q('2')]);
    // The old process's turn finished the draft; a second turn there answered a question
    // the new process already had (restored) with a reply it never saw.
    const { merged, changed } = mergeBacklog(here, [q('1'), r('a', 'draft done', true), q('0'), r('b', 'answer 0', true)]);
    expect(merged.map(([k]) => k)).toEqual(['user:1', 'bot:a', 'user:0', 'bot:b', 'user:2']);
    expect(merged[1]![1]).toEqual({ from: 'bot', text: 'draft done', final: true });
    expect(changed.map(([k]) => k)).toEqual(['bot:a', 'user:0', 'bot:b']);
    // The same state again changes nothing: a tab that has it is sent nothing twice.
    expect(mergeBacklog(new Map(merged), [q('1'), r('a', 'draft done', true)]).changed).toEqual([]);
    // Handed entries unknown here go in front, as the first restore puts the old backlog.
    expect(mergeBacklog(new Map([q('9')]), [q('1'), r('a', 'x', true)]).merged.map(([k]) => k)).toEqual(['user:1', 'bot:a', 'user:9']);
  });

  it('replies deleted after the hand-over go over with the late state, and only reply keys are taken', () => {
    const state = tabsToHandOver([['t', { lastSeenMs: 1, backlog: new Map(), deleted: new Set(['bot:x']) }]]);
    expect(state.tabs).toEqual([{ id: 't', lastSeenMs: 1, backlog: [], deleted: ['bot:x'] }]);
    expect(handedTabs({ tabs: [{ id: 't', lastSeenMs: 1, backlog: [], deleted: ['bot:x', 'user:1', 7] }] })).toEqual(state.tabs);
  });

  it('a restore larger than the bound is dropped by the upgrade channel', () => {
    expect(parseToNew({ t: 'restore', channel: 'web', state: { big: 'x'.repeat(MAX_STATE_BYTES) } })).toBeUndefined();
  });
});
