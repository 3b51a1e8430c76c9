import { describe, expect, it } from 'vitest';
import { STOP_MARKER } from '../../src/stream/reply-stream.js';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChat, withDaemon } from '../helpers/fixtures.js';
import { echoAgent, webchatChannel as web } from '../helpers/toml.js';
import type { ChatClient } from '../helpers/webchat-client.js';

const agent = echoAgent(100);

/** An open tab on web chat channel `channel`, closed when the test finishes. */
function client(d: TestDaemon, channel: string, tab: string): Promise<ChatClient> {
  return withChat(d, tab, { path: `/chat/${channel}` });
}

describe('reload', () => {
  let d: TestDaemon | undefined;

  it('applies a per-channel diff: unchanged untouched, changed restarted after its turn, added started, removed stopped with the stop marker', async () => {
    d = await withDaemon(agent + web('same') + web('changed') + web('removed'));
    const [same, changed, removed] = await Promise.all([client(d, 'same', 't-same'), client(d, 'changed', 't-changed'), client(d, 'removed', 't-removed')]);
    const words = 'one two three four five six seven eight';
    changed.send(words);
    removed.send(words);
    await waitFor(() => changed.replies().length > 0 && removed.replies().length > 0);

    d.rewrite(agent + web('same') + web('changed', 'edit_interval_ms = 250\n') + web('added'));
    const result = await d.daemon.reload();
    expect(result).toMatchObject({ ok: true, generation: 2, added: ['added'], removed: ['removed'], changed: ['changed'] });

    // The turn on the changed channel finished with its whole answer before the restart.
    expect((await changed.finals())[0]!.text).toBe(words);
    // The turn on the removed channel was cancelled: what was written plus the stop marker.
    const [stopped] = await removed.finals();
    expect(stopped!.text!.endsWith(STOP_MARKER)).toBe(true);
    expect(stopped!.text).not.toContain('eight');

    const st = d.daemon.status();
    expect(st.generation).toBe(2);
    expect(st.channels.map((c) => c.id).sort()).toEqual(['added', 'changed', 'same']);
    expect(st.channels.find((c) => c.id === 'same')).toMatchObject({ state: 'connected', connection: 1 });
    // The unchanged channel's socket is the same one, and it still answers.
    same.send('still here');
    expect((await same.finals())[0]!.text).toBe('still here');
    const added = await client(d, 'added', 't-added');
    added.send('new channel');
    expect((await added.finals())[0]!.text).toBe('new channel');
  });

  it('an invalid config changes nothing and is reported', async () => {
    d = await withDaemon(agent + web('web'));
    d.rewrite(`${agent + web('web')}bogus_key = 1\n`);
    const r = await d.daemon.reload();
    expect(r.ok).toBe(false);
    expect(r.errors[0]).toMatch(/daemon\.config\.toml:\d+:1: channels\[0\]\.bogus_key: unknown key/);
    expect(d.daemon.status()).toMatchObject({ generation: 1, last_reload: { ok: false }, channels: [{ id: 'web', state: 'connected', connection: 1 }] });
  });

  it('reloads asked for during a reload coalesce into one more', async () => {
    d = await withDaemon(agent + web('web'));
    d.rewrite(agent + web('web') + web('other'));
    const rs = await Promise.all([d.daemon.reload(), d.daemon.reload(), d.daemon.reload()]);
    // One reload ran, the two asked for during it folded into one more: generation 1 → 3.
    expect(d.daemon.status().generation).toBe(3);
    expect(rs.every((r) => r.ok)).toBe(true);
  });

  it('agent and limit changes apply to new turns without restarting any listener', async () => {
    d = await withDaemon(agent + web('web'));
    const c = await client(d, 'web', 't');
    d.rewrite(`${agent.replace('echo_delay_ms = 100', 'echo_delay_ms = 0')}[limits]\nmax_in_flight = 2\n\n${web('web')}`);
    expect(await d.daemon.reload()).toMatchObject({ ok: true, changed: [], added: [], removed: [] });
    expect(d.daemon.config.config.limits.max_in_flight).toBe(2);
    c.send('fast now');
    expect((await c.finals())[0]!.text).toBe('fast now');
    expect(d.daemon.status().channels[0]).toMatchObject({ connection: 1 });
  });
});
