import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { kinds } from '../../helpers/kinds.js';
import { AckReactions } from '../../../src/dispatch/ack.js';
import type { DispatchChannel } from '../../../src/dispatch/dispatcher.js';
import { createLogger } from '../../../src/observe/logger.js';
import { LogSink, waitFor } from '../../helpers/daemon.js';
import { RecordingAdapter, userMessage } from '../../helpers/recording-adapter.js';

describe('AckReactions', () => {
  const setup = (ack: string | undefined, addDelayMs: number) => {
    const { config } = parseConfig(`[[channels]]\nid = "t"\ntype = "webchat"\n${ack ? `ack_reaction = "${ack}"\n` : ''}`, 'test.toml', kinds, {});
    const adapter = new RecordingAdapter('t');
    const state = new Map<string, boolean>();
    const calls: string[] = [];
    Object.assign(adapter, {
      setReaction: async (ref: { messageId: string }, emoji: string, on: boolean) => {
        calls.push(`${on ? '+' : '-'}${emoji}`);
        if (on) await new Promise((r) => setTimeout(r, addDelayMs));
        state.set(ref.messageId, on);
      },
    });
    const ch: DispatchChannel = { config: config.channels[0]!, adapter };
    const acks = new AckReactions((id) => (id === 't' ? ch : undefined), createLogger({ level: 'silent', destination: new LogSink() }));
    return { acks, state, calls };
  };

  it('a removal issued while the adding is still on its way waits for it: no reaction is left behind', async () => {
    const { acks, state, calls } = setup('👀', 100);
    const msg = userMessage('t', 'hi');
    acks.set(msg, true);
    acks.set(msg, false);
    await waitFor(() => calls.length === 2 && state.get(msg.messageId) === false, 2000);
    expect(calls).toEqual(['+👀', '-👀']);
  });
});
