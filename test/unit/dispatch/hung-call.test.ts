import { describe, expect, it } from 'vitest';
import type { MessageRef } from '../../../src/contracts/message.js';
import { waitFor } from '../../helpers/daemon.js';
import { pipeline } from '../../helpers/pipeline.js';
import { RecordingAdapter, userMessage } from '../../helpers/recording-adapter.js';

/** A platform client with no timeout that ignores its abort signal (Slack's WebClient, say): its send never returns. */
class HangingAdapter extends RecordingAdapter {
  sends = 0;
  override send(): Promise<MessageRef> {
    this.sends++;
    return new Promise<MessageRef>(() => {});
  }
}

function hung() {
  const adapter = new HangingAdapter('t');
  const p = pipeline('', '', { adapter });
  return { adapter, p };
}

const state = (p: ReturnType<typeof pipeline>) => (p.db.prepare('SELECT state FROM inbox').get() as { state: string }).state;

describe('a transport call that hangs and ignores its signal', () => {
  it('holds shutdown only until hardStop; the item stays unanswered for the next start', async () => {
    const { adapter, p } = hung();
    await p.dispatcher.deliver(userMessage('t', 'hello'));
    await waitFor(() => adapter.sends > 0);
    const shutdown = p.dispatcher.shutdown(10);
    // The daemon's hard stop (2 × grace, or a second SIGTERM) ends the wait.
    p.hardStop.abort();
    await shutdown;
    expect(p.logs.text).toContain('cancelled turns did not end; no longer waiting for them');
    // Nothing was sent, so nothing was recorded: the next start answers it again.
    expect(state(p)).toBe('pending');
    p.db.close();
  });

  it('holds a channel settling only until its signal aborts', async () => {
    const { adapter, p } = hung();
    await p.dispatcher.deliver(userMessage('t', 'hello'));
    await waitFor(() => adapter.sends > 0);
    const stop = new AbortController();
    const settling = p.dispatcher.settleChannel('t', 10, true, stop.signal);
    stop.abort();
    await settling;
    expect(p.dispatcher.snapshot().inFlight).toBe(1); // left behind, not forgotten: its lane stays busy
    p.db.close();
  });
});
