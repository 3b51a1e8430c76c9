import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { withLlm, withTempDir } from '../helpers/fixtures.js';
import { slackChannel, slackEnv, withSlack } from '../helpers/platforms.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { llmAgent } from '../helpers/toml.js';

describe('Slack, daemon as a real process', () => {
  // A native chat stream posts its message at chat.startStream. Its ts is stored at once, so
  // the turn run again after a kill -9 finishes that message (chat.update) instead of posting
  // a second answer under the half-written one.
  it('kill -9 mid-stream, start again: one answer, in the message the stream had posted', async () => {
    const sl = await withSlack();
    const llm = await withLlm();
    const file = writeProcessConfig(withTempDir('slproc'), llmAgent(llm.url) + slackChannel(sl));
    const env = slackEnv(sl);
    const words = Array.from({ length: 30 }, (_, i) => `w${i} `);
    const text = words.join('').trim();
    // The first process's model writes all but the last word and then stalls: the turn is
    // mid-stream whenever the kill lands. The restarted process's request gets the fake's
    // default answer, the whole text.
    llm.script({ kind: 'stall', chunks: words.slice(0, -1).map((content) => ({ content, delayMs: 100 })) });
    const p1 = withDaemonProcess(file, env);
    const dm = sl.dmEvent(text);
    sl.push(dm);
    // An append after the start: the stream is open and its message's ts had a commit's
    // time to be stored (an append waits at least the channel's interval after the start).
    await waitFor(() => sl.callsOf('chat.appendStream').length >= 2, 15_000);
    p1.signal('SIGKILL');
    await p1.exited;
    const [streamed] = sl.messages.filter((m) => m.channel === 'D0DM0001');
    expect(streamed!.text).not.toBe(text);

    const p2 = withDaemonProcess(file, env);
    const url = await p2.url();
    await waitFor(() => sl.texts('D0DM0001')[0] === text, 15_000);
    // Settled: every envelope is acked and no turn runs or waits, so nothing can post again.
    await waitFor(async () => sl.unacked === 0 && ((await (await fetch(`${url}/status`)).json()) as { turns: { list: unknown[] } }).turns.list.length === 0);
    expect(sl.texts('D0DM0001')).toEqual([text]);
    expect(sl.messages.filter((m) => m.channel === 'D0DM0001').map((m) => m.ts)).toEqual([streamed!.ts]);
    expect(sl.callsOf('chat.startStream')).toHaveLength(1);
    expect(llm.requests).toHaveLength(2);
    p2.signal('SIGTERM');
    expect(await p2.exited).toBe(0);
  });
});
