import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { withLlm, withTempDir } from '../helpers/fixtures.js';
import { mattermostChannel, mattermostEnv, withMattermost } from '../helpers/mattermost.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { llmAgent } from '../helpers/toml.js';

describe('Mattermost, daemon as a real process', () => {
  it('kill -9 mid-answer, start again: exactly one post, finished in place; a post made while it was down is caught up', async () => {
    const mm = await withMattermost();
    const llm = await withLlm();
    const file = writeProcessConfig(withTempDir('mmproc'), llmAgent(llm.url) + mattermostChannel(mm));
    const env = mattermostEnv(mm);
    const words = Array.from({ length: 30 }, (_, i) => `w${i} `);
    const text = words.join('').trim();
    // The first process's model writes all but the last word and stalls: mid-answer whenever
    // the kill lands. The restarted process gets the whole text.
    llm.script({ kind: 'stall', chunks: words.slice(0, -1).map((content) => ({ content, delayMs: 100 })) });
    const p1 = withDaemonProcess(file, env);
    await waitFor(() => mm.connected, 15_000);
    mm.userPost(text);
    // An edit means the draft's post id was committed before it.
    await waitFor(() => mm.botPosts(mm.dm.id).length === 1 && mm.botPosts(mm.dm.id)[0]!.edits >= 1, 15_000);
    p1.signal('SIGKILL');
    await p1.exited;
    expect(mm.texts(mm.dm.id)[0]).not.toBe(text);
    const meanwhile = mm.userPost('sent while the daemon was down');

    const p2 = withDaemonProcess(file, env);
    const url = await p2.url();
    await waitFor(() => mm.texts(mm.dm.id)[0] === text && mm.texts(mm.dm.id)[1] === meanwhile.message, 15_000);
    await waitFor(async () => ((await (await fetch(`${url}/status`)).json()) as { turns: { list: unknown[] } }).turns.list.length === 0);
    expect(mm.texts(mm.dm.id)).toEqual([text, meanwhile.message]);
    expect(mm.callsOf('create')).toHaveLength(2);
    expect(llm.requests).toHaveLength(3);
    expect(p2.lines.some((l) => l.msg === 'recovered unfinished messages from the inbox')).toBe(true);
    p2.signal('SIGTERM');
    expect(await p2.exited).toBe(0);
  });
});
