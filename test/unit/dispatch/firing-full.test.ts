import { describe, expect, it } from 'vitest';
import type { Admission, Incoming } from '../../../src/contracts/topology.js';
import { CodedError } from '../../../src/contracts/errors.js';
import { LocalTopology } from '../../../src/topology/local/local-topology.js';
import type { Inbox } from '../../../src/store/inbox.js';
import { waitFor } from '../../helpers/daemon.js';
import { withPipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

/**
 * A topology whose inbox is away for the next `away` writes (STORAGE_UNAVAILABLE: the message is
 * held), then at its bound for the next `full` messages, as a cluster's JetStream stream is at
 * `[cluster] max_queued` (it refuses them: 'full'); then it stores again.
 */
class FullFor extends LocalTopology {
  constructor(inbox: Inbox, full: number, away = 0) {
    super(inbox);
    const receive = this.intake.receive.bind(this.intake);
    this.intake.receive = async (incoming: Incoming): Promise<Admission> => {
      if (away-- > 0) throw new CodedError('STORAGE_UNAVAILABLE', 'the store is away');
      return full-- > 0 ? 'full' : receive(incoming);
    };
  }
}

// A firing refused as 'full' was taken for delivered: the reminder was marked fired and never
// posted (the schedule's firing skipped), and the chat was told "busy" with no one behind it.
describe('a firing the inbox is too full to store', () => {
  it('is refused with INBOX_FULL (its caller tries it again), with no busy reply; a user in the same spot is told busy', async () => {
    const p = withPipeline('[agent]\nprovider = "echo"\n', '', { topology: (inbox) => new FullFor(inbox, 2) });
    for (const kind of ['reminder', 'schedule'] as const) {
      const firing = userMessage('t', 'water the plants', { synthetic: { kind, id: `${kind}-1` } });
      const refused = await p.dispatcher.deliver(firing).catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(CodedError);
      expect(refused).toMatchObject({ code: 'INBOX_FULL', retryable: true });
    }
    expect(p.adapter.calls.filter((c) => c.op === 'send')).toEqual([]);
    // The bound is gone: the firing is stored and answered.
    expect(await p.dispatcher.deliver(userMessage('t', 'water the plants', { synthetic: { kind: 'reminder', id: 'reminder-2' } }))).toBe(true);
    await waitFor(() => p.adapter.visible('chat-1').length === 1);

    // Held while the store was away, then refused as full when the hold wrote it: refused the same.
    const held = withPipeline('[agent]\nprovider = "echo"\n', '', { topology: (inbox) => new FullFor(inbox, 1, 1) });
    const late = await held.dispatcher
      .deliver(userMessage('t', 'feed the cat', { synthetic: { kind: 'reminder', id: 'reminder-3' } }))
      .catch((err: unknown) => err);
    expect(late).toMatchObject({ code: 'INBOX_FULL' });
    expect(held.adapter.calls.filter((c) => c.op === 'send').map((c) => c.text)).not.toContain('I am busy right now, try again shortly.');
    expect(held.logs.entries().some((e) => e.msg === 'a held firing was refused: the inbox is full')).toBe(true);

    const user = withPipeline('[agent]\nprovider = "echo"\n', '', { topology: (inbox) => new FullFor(inbox, 1) });
    expect(await user.dispatcher.deliver(userMessage('t', 'hello'))).toBe(true);
    await waitFor(() => user.adapter.visible('chat-1').includes('I am busy right now, try again shortly.'));
  });
});
