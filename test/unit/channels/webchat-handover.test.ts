import { describe, expect, it } from 'vitest';
import { handedTabs, MAX_HANDOVER_BYTES, tabsToHandOver, type BacklogEntry } from '../../../channels/webchat/handover.js';
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

  it('a restore larger than the bound is dropped by the upgrade channel', () => {
    expect(parseToNew({ t: 'restore', channel: 'web', state: { big: 'x'.repeat(MAX_STATE_BYTES) } })).toBeUndefined();
  });
});
