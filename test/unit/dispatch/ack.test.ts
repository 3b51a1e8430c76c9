import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { kinds } from '../../helpers/kinds.js';
import { AckReactions } from '../../../src/dispatch/ack.js';
import type { DispatchChannel } from '../../../src/dispatch/dispatcher.js';
import { createLogger } from '../../../src/observe/logger.js';
import { LogSink, waitFor } from '../../helpers/daemon.js';
import { RecordingAdapter, userMessage } from '../../helpers/recording-adapter.js';

describe('AckReactions', () => {
  const setup = (ack: string | undefined) => {
    const { config } = parseConfig(`[[channels]]\nid = "t"\ntype = "webchat"\n${ack ? `ack_reaction = "${ack}"\n` : ''}`, 'test.toml', kinds, {});
    const adapter = new RecordingAdapter('t', {}, { reactions: true });
    const ch: DispatchChannel = { config: config.channels[0]!, adapter };
    const acks = new AckReactions((id) => (id === 't' ? ch : undefined), createLogger({ level: 'silent', destination: new LogSink() }));
    return { acks, adapter };
  };

  it('a removal issued while the adding is still on its way waits for it: no reaction is left behind', async () => {
    const { acks, adapter } = setup('👀');
    // The platform holds the adding until the removal has been issued.
    const adding = adapter.hold((c) => c.text === '+👀');
    const msg = userMessage('t', 'hi');
    acks.set(msg, true);
    await adding.reached;
    acks.set(msg, false);
    adding.release();
    await waitFor(() => adapter.calls.length === 2);
    expect(adapter.calls.map((c) => c.text)).toEqual(['+👀', '-👀']);
    expect(adapter.reactions.get(msg.messageId)).toEqual(new Set());
  });
});
