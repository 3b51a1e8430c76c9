import { describe, expect, it } from 'vitest';
import { waitFor } from '../../helpers/daemon.js';
import { withPipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

describe('a failed upgrade: the old process answers what the new one stored, and only that', () => {
  it('queues an unfinished item nobody here queued; leaves alone one it queued since the upgrade began, whose end is not yet committed', async () => {
    const p = withPipeline('[agent]\nprovider = "echo"\n');
    p.dispatcher.trackAdmissions();
    await p.dispatcher.deliver(userMessage('t', 'answered here', { messageId: 'here' }));
    await waitFor(() => p.adapter.visible('chat-1').includes('answered here'));
    await waitFor(() => p.dispatcher.snapshot().inFlight === 0);
    // Its end still in a group commit (a busy store): the row reads as unfinished.
    p.db.prepare("UPDATE inbox SET state = 'running' WHERE message_id = 'here'").run();
    // What the new process stored with the same inbox code, then failed.
    await p.inbox.addDurable(userMessage('t', 'stored by the new process', { messageId: 'there', chat: { id: 'chat-2', type: 'dm' } }), 't:chat-2', 'pending');
    expect(p.dispatcher.recoverUnheld()).toBe(1);
    await waitFor(() => p.adapter.visible('chat-2').includes('stored by the new process'));
    expect(p.adapter.visible('chat-1')).toEqual(['answered here']);
  });

  it('queues nothing once this process froze (a later upgrade went ahead) or while it is itself taking over', async () => {
    const p = withPipeline('[agent]\nprovider = "echo"\n');
    await p.inbox.addDurable(userMessage('t', 'stored elsewhere', { messageId: 'x' }), 't:chat-1', 'pending');
    p.dispatcher.trackAdmissions();
    p.dispatcher.freeze();
    expect(p.dispatcher.recoverUnheld()).toBe(0);
    const q = withPipeline('[agent]\nprovider = "echo"\n');
    await q.inbox.addDurable(userMessage('t', 'stored elsewhere', { messageId: 'y' }), 't:chat-1', 'pending');
    q.dispatcher.deferTurns();
    expect(q.dispatcher.recoverUnheld()).toBe(0);
  });
});
