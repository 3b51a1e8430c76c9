import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { withLlm, withTempDir } from '../helpers/fixtures.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { teamsChannel, teamsEnv, withTeams } from '../helpers/teams.js';
import { llmAgent } from '../helpers/toml.js';

const GROUP = '19:group@thread.v2';
const words = Array.from({ length: 30 }, (_, i) => `w${i} `);

/**
 * The fakes and a first daemon process whose model writes all but the last word and then
 * stalls, so a kill lands mid-answer however slow the machine; a restarted process's
 * request gets the fake's default answer, the whole text.
 */
async function firstProcess() {
  const ms = await withTeams();
  const llm = await withLlm();
  const file = writeProcessConfig(withTempDir('msproc'), llmAgent(llm.url) + teamsChannel(ms));
  llm.script({ kind: 'stall', chunks: words.slice(0, -1).map((content) => ({ content, delayMs: 100 })) });
  const p1 = withDaemonProcess(file, teamsEnv(ms));
  ms.webhook = `${await p1.url()}/webhooks/ms`;
  await waitFor(() => p1.lines.some((l) => l.msg === 'channel ms connected'), 15_000);
  return { ms, file, text: words.join('').trim(), p1 };
}

describe('Teams, daemon as a real process', () => {
  it('kill -9 mid-answer in a group chat, start again: one answer, in the activity that already existed', async () => {
    const { ms, file, text, p1 } = await firstProcess();
    expect(await ms.post(ms.activity(text, { kind: 'groupChat', mention: true }))).toBe(200);
    // An update means the first activity's id was committed before it.
    await waitFor(() => ms.activities.length === 1 && ms.activities[0]!.updates >= 1, 15_000);
    p1.signal('SIGKILL');
    await p1.exited;
    expect(ms.texts(GROUP)[0]).not.toBe(text);

    const p2 = withDaemonProcess(file, teamsEnv(ms));
    const url = await p2.url();
    await waitFor(() => ms.texts(GROUP)[0] === text, 20_000);
    await waitFor(async () => ((await (await fetch(`${url}/status`)).json()) as { turns: { list: unknown[] } }).turns.list.length === 0, 15_000);
    expect(ms.activities).toHaveLength(1);
    expect(ms.callsOf('reply')).toHaveLength(1);
    expect(p2.lines.some((l) => l.msg === 'recovered unfinished messages from the inbox')).toBe(true);
    p2.signal('SIGTERM');
    expect(await p2.exited).toBe(0);
  });

  it('kill -9 mid-stream in a 1:1 chat, start again: the streamed message is updated in place with the whole answer', async () => {
    const { ms, file, text, p1 } = await firstProcess();
    expect(await ms.post(ms.activity(text))).toBe(200);
    await waitFor(() => ms.streamUpdates.length >= 2, 15_000);
    p1.signal('SIGKILL');
    await p1.exited;
    // The stream's first chunk posted the message: it stays, with the text so far.
    expect(ms.activities).toHaveLength(1);
    expect(ms.activities[0]!.streaming).toBe(true);

    const p2 = withDaemonProcess(file, teamsEnv(ms));
    const url = await p2.url();
    await waitFor(() => ms.texts('a:1personal-ada')[0] === text, 20_000);
    await waitFor(async () => ((await (await fetch(`${url}/status`)).json()) as { turns: { list: unknown[] } }).turns.list.length === 0, 15_000);
    expect(ms.texts('a:1personal-ada')).toEqual([text]);
    expect(ms.callsOf('send')).toHaveLength(0);
    p2.signal('SIGTERM');
    expect(await p2.exited).toBe(0);
  });

  it('where Teams refuses to update a stream still open, the restarted turn still answers, as a new message', async () => {
    const { ms, file, text, p1 } = await firstProcess();
    ms.refuseUpdatesWhileStreaming = true;
    expect(await ms.post(ms.activity(text))).toBe(200);
    await waitFor(() => ms.streamUpdates.length >= 2, 15_000);
    p1.signal('SIGKILL');
    await p1.exited;

    const p2 = withDaemonProcess(file, teamsEnv(ms));
    const url = await p2.url();
    await waitFor(() => ms.texts('a:1personal-ada').at(-1) === text, 20_000);
    await waitFor(async () => ((await (await fetch(`${url}/status`)).json()) as { turns: { list: unknown[] } }).turns.list.length === 0, 15_000);
    expect(ms.texts('a:1personal-ada')).toHaveLength(2);
    expect(ms.callsOf('send')).toHaveLength(1);
    p2.signal('SIGTERM');
    expect(await p2.exited).toBe(0);
  });
});
