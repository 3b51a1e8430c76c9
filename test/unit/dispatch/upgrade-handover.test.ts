import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../helpers/daemon.js';
import { pipeline, type Pipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

const slow = `[agent]\nprovider = "echo"\necho_delay_ms = 40\n`;
const dm = (id: string) => ({ chat: { id, type: 'dm' as const } });

function states(p: Pipeline): string[] {
  return (p.db.prepare('SELECT state FROM inbox ORDER BY id').all() as { state: string }[]).map((r) => r.state);
}

/** The two dispatcher halves of `channeld upgrade` (src/daemon/upgrade/): the new process defers, the old one freezes. */
describe('Dispatcher during an upgrade', () => {
  let p: Pipeline | undefined;
  afterEach(async () => {
    await p?.close();
    p = undefined;
  });

  it('new process: stores but starts nothing until resumed; busy scopes wait for the last resume, which also takes what the old one stored late', async () => {
    p = pipeline(slow);
    p.dispatcher.deferTurns();
    await p.dispatcher.deliver(userMessage('t', 'for a', dm('a')));
    await p.dispatcher.deliver(userMessage('t', 'for b', dm('b')));
    // Stored (the platform may be acknowledged), neither queued nor started.
    expect(states(p)).toEqual(['pending', 'pending']);
    expect(p.dispatcher.snapshot()).toMatchObject({ inFlight: 0, queued: 0 });
    expect(p.dispatcher.recover()).toBe(0);

    // The old process froze with a turn still running in b's conversation.
    expect(p.dispatcher.resumeTurns(new Set(['t:b']))).toBe(1);
    await waitFor(() => states(p!)[0] === 'done');
    await p.dispatcher.deliver(userMessage('t', 'more for b', dm('b')));
    expect(p.dispatcher.snapshot()).toMatchObject({ inFlight: 0, queued: 0 });
    expect(states(p)).toEqual(['done', 'pending', 'pending']);

    // Stored by the old process after it froze (a webhook in flight): nobody queued it here.
    p.inbox.add(userMessage('t', 'late for c', dm('c')), 't:c');
    expect(p.dispatcher.resumeTurns(new Set(), true)).toBe(3);
    await waitFor(() => states(p!).every((s) => s === 'done'));
    expect(p.adapter.visible('a')).toEqual(['for a']);
    expect(p.adapter.visible('b')).toEqual(['for b', 'more for b']);
    expect(p.adapter.visible('c')).toEqual(['late for c']);
    // Over: nothing is queued a second time.
    expect(p.dispatcher.resumeTurns(new Set(), true)).toBe(0);
  });

  it('old process: freeze names the scopes whose turns run, refuses new messages and leaves the queued ones pending', async () => {
    p = pipeline(`${slow}\n[limits]\nmax_in_flight = 1\n`);
    await p.dispatcher.deliver(userMessage('t', 'one two three four five', dm('x')));
    await p.dispatcher.deliver(userMessage('t', 'queued in x', dm('x')));
    await p.dispatcher.deliver(userMessage('t', 'queued in y', dm('y')));
    await waitFor(() => p!.adapter.visible('x').length);
    expect(p.dispatcher.freeze()).toEqual(['t:x']);
    await expect(p.dispatcher.deliver(userMessage('t', 'after the freeze', dm('z')))).rejects.toMatchObject({ code: 'DAEMON_SHUTTING_DOWN' });
    // The running turn finishes here; nothing else starts.
    await waitFor(() => p!.adapter.visible('x')[0] === 'one two three four five' && states(p!)[0] === 'done');
    expect(p.dispatcher.snapshot().inFlight).toBe(0);
    expect(states(p)).toEqual(['done', 'pending', 'pending']);
  });
});
