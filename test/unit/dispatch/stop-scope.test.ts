import { describe, expect, it } from 'vitest';
import { STOP_MARKER } from '../../../src/stream/reply-stream.js';
import { waitFor } from '../../helpers/daemon.js';
import { withPipeline, type Pipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

const slow = `[agent]\nprovider = "echo"\necho_delay_ms = 40\n`;
const words = (tag: string) => Array.from({ length: 25 }, (_, i) => `${tag}${i}`).join(' ');
const group = { chat: { id: 'g', type: 'group' as const } };
const from = (id: string) => ({ sender: { id, name: id, isBot: false } });

function states(p: Pipeline): string[] {
  return (p.db.prepare('SELECT state FROM inbox ORDER BY id').all() as { state: string }[]).map((r) => r.state);
}

describe('/stop in groups', () => {
  let p: Pipeline | undefined;

  it("a member's /stop leaves another member's answer running and drops only their own queued message", async () => {
    p = withPipeline(slow, 'admins = ["boss"]\n');
    await p.dispatcher.deliver(userMessage('t', words('ada'), { ...group, ...from('ada') }));
    await p.dispatcher.deliver(userMessage('t', words('bob'), { ...group, ...from('bob') }));
    await waitFor(() => p!.adapter.visible('g').length > 0);
    await p.dispatcher.deliver(userMessage('t', '/stop', { ...group, ...from('bob') }));
    await waitFor(() => p!.adapter.visible('g').includes(words('ada')), 10_000);
    await waitFor(() => p!.dispatcher.snapshot().inFlight === 0);
    const shown = p.adapter.visible('g');
    expect(shown).toEqual([words('ada'), 'Stopped.']);
    expect(states(p)).toEqual(['done', 'failed', 'done']);
  });

  it('a member whose own answer runs stops it, with one visible result', async () => {
    p = withPipeline(slow);
    await p.dispatcher.deliver(userMessage('t', words('ada'), { ...group, ...from('ada') }));
    await waitFor(() => p!.adapter.visible('g').length > 0);
    await p.dispatcher.deliver(userMessage('t', '/stop', { ...group, ...from('ada') }));
    await waitFor(() => p!.dispatcher.snapshot().inFlight === 0, 5000);
    const shown = p.adapter.visible('g');
    expect(shown).toHaveLength(1);
    expect(shown[0]!.endsWith(STOP_MARKER)).toBe(true);
  });

  it('with nothing visible yet, the stopped answer is the marker alone: still one message', async () => {
    p = withPipeline(`[agent]\nprovider = "echo"\necho_delay_ms = 2000\n`);
    await p.dispatcher.deliver(userMessage('t', 'slow words here', { ...group, ...from('ada') }));
    await waitFor(() => p!.dispatcher.snapshot().inFlight === 1);
    await p.dispatcher.deliver(userMessage('t', '/stop', { ...group, ...from('ada') }));
    await waitFor(() => p!.dispatcher.snapshot().inFlight === 0, 5000);
    expect(p.adapter.visible('g')).toHaveLength(1);
    expect(p.adapter.visible('g')[0]!.endsWith(STOP_MARKER)).toBe(true);
  });

  it("an admin's /stop stops anyone's answer; /stop all also drops everyone's queue; others may not /stop all", async () => {
    p = withPipeline(slow, 'admins = ["boss"]\n');
    await p.dispatcher.deliver(userMessage('t', words('ada'), { ...group, ...from('ada') }));
    await p.dispatcher.deliver(userMessage('t', words('bob'), { ...group, ...from('bob') }));
    await p.dispatcher.deliver(userMessage('t', words('cid'), { ...group, ...from('cid') }));
    await waitFor(() => p!.adapter.visible('g').length > 0);
    await p.dispatcher.deliver(userMessage('t', '/stop all', { ...group, ...from('bob') }));
    await waitFor(() => p!.adapter.visible('g').some((t) => t.startsWith('Only the channel')));
    await p.dispatcher.deliver(userMessage('t', '/stop', { ...group, ...from('boss') }));
    // Ada's answer is stopped; Bob's starts.
    await waitFor(() => p!.adapter.visible('g').some((t) => t.startsWith('bob0')), 5000);
    expect(p.adapter.visible('g')[0]!.endsWith(STOP_MARKER)).toBe(true);
    await p.dispatcher.deliver(userMessage('t', '/stop all', { ...group, ...from('boss') }));
    await waitFor(() => p!.dispatcher.snapshot().inFlight === 0 && p!.dispatcher.snapshot().queued === 0, 5000);
    expect(p.adapter.visible('g').join('\n')).not.toContain('cid0');
    expect(states(p).filter((s) => s === 'failed')).toHaveLength(3);
  });

  it('a bare /stop (not addressed) from someone whose turn runs here stops it and is not fed to the model', async () => {
    p = withPipeline(slow);
    await p.dispatcher.deliver(userMessage('t', words('ada'), { ...group, ...from('ada') }));
    await waitFor(() => p!.adapter.visible('g').length > 0);
    expect(await p.dispatcher.deliver(userMessage('t', '/stop', { ...group, ...from('ada'), addressed: false }))).toBe(true);
    await waitFor(() => p!.dispatcher.snapshot().inFlight === 0, 5000);
    expect(p.adapter.visible('g')[0]!.endsWith(STOP_MARKER)).toBe(true);
    expect(p.dispatcher.passive.take('t:g')).toEqual([]);
    // From someone with nothing running here it stays what it was: context, not a command.
    await p.dispatcher.deliver(userMessage('t', '/stop', { ...group, ...from('cid'), addressed: false }));
    expect(p.dispatcher.passive.take('t:g').map((m) => m.sender.id)).toEqual(['cid']);
  });
});
