import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { withLlm, withTempDir } from '../helpers/fixtures.js';
import { matrixChannel, matrixEnv, withMatrix } from '../helpers/matrix.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { llmAgent } from '../helpers/toml.js';

describe('Matrix, daemon as a real process', () => {
  it('kill -9 mid-answer, start again: one answer, in the message that already existed; what came while down is answered', async () => {
    const mx = await withMatrix();
    const llm = await withLlm();
    const file = writeProcessConfig(withTempDir('mxproc'), llmAgent(llm.url) + matrixChannel(mx));
    const words = Array.from({ length: 30 }, (_, i) => `w${i} `);
    const text = words.join('').trim();
    // The first process's model writes all but the last word and then stalls, so the kill
    // lands mid-answer however slow the machine; the restarted one gets the whole text.
    llm.script({ kind: 'stall', chunks: words.slice(0, -1).map((content) => ({ content, delayMs: 100 })) });
    const p1 = withDaemonProcess(file, matrixEnv(mx));
    await waitFor(() => mx.callsOf('sync').length >= 2, 15_000);
    mx.dm(text);
    // An edit means the first message's event id was committed before it.
    await waitFor(() => mx.messagesIn(mx.dmRoom).length === 1 && mx.messagesIn(mx.dmRoom)[0]!.edits >= 1, 15_000);
    p1.signal('SIGKILL');
    await p1.exited;
    expect(mx.texts(mx.dmRoom)[0]).not.toBe(text);
    mx.dm('sent while the bot was down');

    const p2 = withDaemonProcess(file, matrixEnv(mx));
    const url = await p2.url();
    await waitFor(() => mx.texts(mx.dmRoom)[0] === text && mx.texts(mx.dmRoom)[1] !== undefined, 20_000);
    await waitFor(
      async () => mx.syncedTo >= mx.position && ((await (await fetch(`${url}/status`)).json()) as { turns: { list: unknown[] } }).turns.list.length === 0,
      15_000,
    );
    expect(mx.messagesIn(mx.dmRoom)).toHaveLength(2);
    expect(mx.texts(mx.dmRoom)[0]).toBe(text);
    expect(p2.lines.some((l) => l.msg === 'recovered unfinished messages from the inbox')).toBe(true);
    p2.signal('SIGTERM');
    expect(await p2.exited).toBe(0);
  });
});
