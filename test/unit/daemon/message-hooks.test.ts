import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { MessageHookEvent } from '../../../src/contracts/message-hooks.js';
import { Extensions, type PluginFailure } from '../../../src/daemon/extensions.js';
import { MESSAGE_HOOK_MAX_IN_FLIGHT } from '../../../src/daemon/message-hooks.js';
import { definitionProblems } from '../../../src/daemon/plugin-folders.js';
import { waitFor } from '../../helpers/daemon.js';
import { withPipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

const agent = '[agent]\nprovider = "echo"\necho_delay_ms = 0\n';
const group = { chat: { id: 'g1', type: 'group' as const } };

/** A pipeline whose dispatcher and executor feed `extensions`' message hooks, as the daemon wires them. */
function wired(extensions: Extensions) {
  const hooks = extensions.messages;
  return withPipeline(agent, '', {
    dispatcher: { onReceived: (message, verdict) => hooks.emit({ phase: 'message_received', message, addressed: message.addressed, verdict }) },
    executor: { onSent: (target, text) => hooks.emit({ phase: 'message_sent', target, text }) },
  });
}

describe('message hooks', () => {
  it('see every message, also unaddressed ones in groups, and every reply; a hook that has not finished holds up nothing', async () => {
    const failures: PluginFailure[] = [];
    const extensions = new Extensions((f) => failures.push(f));
    const seen: MessageHookEvent[] = [];
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const undo = extensions.add('test/hooks', {
      name: 'observer',
      hooks: [
        { phase: 'message_received', name: 'all_in', run: (e) => void seen.push(e) },
        { phase: 'message_sent', name: 'all_out', run: (e) => void seen.push(e) },
        // Still running while the message is answered: delivery never waits for a hook.
        { phase: 'message_received', name: 'slow', timeout_ms: 60_000, run: () => held },
      ],
    });
    const p = wired(extensions);
    expect(await p.dispatcher.deliver(userMessage('t', 'chatter between others', { ...group, addressed: false }))).toBe(false);
    await p.dispatcher.deliver(userMessage('t', 'hello bot'));
    await waitFor(() => p.adapter.visible('chat-1').includes('hello bot') && seen.some((e) => e.phase === 'message_sent'));
    expect(seen.map((e) => (e.phase === 'message_received' ? [e.phase, e.message.text, e.addressed, e.verdict] : [e.phase, e.text, e.target.chatId]))).toEqual([
      ['message_received', 'chatter between others', false, 'unaddressed'],
      ['message_received', 'hello bot', true, 'accepted'],
      ['message_sent', 'hello bot', 'chat-1'],
    ]);
    release();
    await extensions.messages.idle();
    expect(failures).toEqual([]);
    undo();
    expect(extensions.messages.size).toBe(0);
  });

  it("a throw and a timeout are reported with the plugin's name; the hook's signal aborts at its timeout", async () => {
    const failures: PluginFailure[] = [];
    const extensions = new Extensions((f) => failures.push(f));
    let aborted: AbortSignal | undefined;
    extensions.add('test/bad', {
      name: 'bad',
      hooks: [
        {
          phase: 'message_received',
          name: 'thrower',
          run: () => {
            throw new Error('boom');
          },
        },
        {
          phase: 'message_received',
          name: 'stuck',
          timeout_ms: 20,
          run: (_e, signal) => {
            aborted = signal;
            return new Promise(() => {});
          },
        },
      ],
    });
    extensions.messages.emit({ phase: 'message_received', message: userMessage('t', 'x'), addressed: true, verdict: 'accepted' });
    await extensions.messages.idle();
    expect(failures.map((f) => [f.plugin, f.name, f.phase, (f.err as Error).message])).toEqual(
      expect.arrayContaining([
        ['bad', 'thrower', 'message_received', 'boom'],
        ['bad', 'stuck', 'message_received', expect.stringContaining('did not finish within 20 ms')],
      ]),
    );
    expect(aborted?.aborted).toBe(true);
  });

  it('a hook that never finishes takes at most a bounded number of runs; later messages skip it, reported', async () => {
    const failures: PluginFailure[] = [];
    const extensions = new Extensions((f) => failures.push(f));
    let runs = 0;
    extensions.add('test/stuck', {
      name: 'stuck',
      hooks: [
        {
          phase: 'message_sent',
          name: 'never',
          timeout_ms: 60_000,
          run: () => {
            runs++;
            return new Promise(() => {});
          },
        },
      ],
    });
    for (let i = 0; i < MESSAGE_HOOK_MAX_IN_FLIGHT + 3; i++)
      extensions.messages.emit({ phase: 'message_sent', target: { channelId: 't', chatId: 'c', chatType: 'dm' }, text: `${i}` });
    await waitFor(() => runs === MESSAGE_HOOK_MAX_IN_FLIGHT);
    expect(failures.map((f) => (f.err as { code: string }).code)).toEqual(['MESSAGE_HOOK_BUSY', 'MESSAGE_HOOK_BUSY', 'MESSAGE_HOOK_BUSY']);
  });

  it('the logbook fixture (docs/EXTENDING.md) is a valid plugin folder; a bad phase or timeout_ms is named', async () => {
    const fixture = pathToFileURL(join(import.meta.dirname, '../../fixtures/plugins/logbook/index.mjs')).href;
    const { default: logbook } = (await import(fixture)) as { default: unknown };
    expect(definitionProblems(logbook)).toEqual([]);
    expect(definitionProblems({ name: 'x', hooks: [{ phase: 'message_recieved', name: 'h', run: () => {} }] })[0]).toMatch(
      /phase must be one of .*message_received, message_sent/,
    );
    expect(definitionProblems({ name: 'x', hooks: [{ phase: 'message_sent', name: 'h', timeout_ms: 0, run: () => {} }] })).toEqual([
      'hooks[0] ("h"): timeout_ms must be a whole number of milliseconds from 1 to 60000',
    ]);
  });
});
