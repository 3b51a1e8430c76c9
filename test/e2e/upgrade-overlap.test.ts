import { describe, expect, it, onTestFailed } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { withLlm, withTempDir } from '../helpers/fixtures.js';
import { slackChannel, slackEnv, withSlack } from '../helpers/platforms.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { scaled } from '../helpers/timing.js';
import { echoAgent, llmAgent, webchatChannel } from '../helpers/toml.js';
import { ChatClient, seen } from '../helpers/webchat-client.js';
import { killRecordedDaemonAtEnd, pidOf, stopPid } from '../helpers/upgrade.js';

/** The listeners that overlap during an upgrade instead of being handed over (docs/OPERATIONS.md "Upgrading"). */
describe('upgrade: Slack Socket Mode and web chat, real processes', () => {
  it(
    'Slack: the new socket opens before the old one closes; events sent at the hand-over are acked once each and answered once',
    async () => {
      const sl = await withSlack();
      // As Slack does: each envelope goes to one open socket (the old process's, while it is
      // open), and what a closing socket left unacked is sent again on another.
      sl.spread = 'one';
      const dir = withTempDir('upgrade-slack');
      const file = writeProcessConfig(dir, `${echoAgent(0)}${slackChannel(sl)}`);
      const old = withDaemonProcess(file, slackEnv(sl));
      killRecordedDaemonAtEnd(dir);
      // What Slack saw and both processes logged (the new one writes to the old one's output).
      onTestFailed(() => {
        console.log(JSON.stringify({ socketLog: sl.socketLog, sent: sl.sentEnvelopes, acks: sl.ackLog, unacked: sl.unacked }));
        for (const line of old.lines) console.log(JSON.stringify(line));
      });
      const url = await old.url();
      await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, 15_000);
      const say = (text: string) => sl.push(sl.dmEvent(text));
      say('before');
      await waitFor(() => sl.texts('D0DM0001').includes('before'), 15_000);

      old.signal('SIGUSR2');
      // The moment the new process's socket is open: the old one still has its own, and gets this.
      await waitFor(() => sl.connections === 2, 30_000);
      const atHandOver = say('at the hand-over');
      await waitFor(() => sl.socketLog.some((e) => e.socket === 1 && e.event === 'close'), 30_000);
      say('just after');
      expect(await old.exited).toBe(0);
      say('after');

      const texts = ['before', 'at the hand-over', 'just after', 'after'];
      await waitFor(() => texts.every((t) => sl.texts('D0DM0001').includes(t)), 15_000);
      // Slack sends an envelope again when its ack came late: whichever process took it first,
      // the new one acks the copy and the dedup key (channel, message id) keeps it one message.
      sl.redeliver(atHandOver);
      await waitFor(() => sl.unacked === 0 && sl.ackLog.filter((a) => a.id === atHandOver).length === 2, 15_000);
      await waitFor(async () => ((await (await fetch(`${url}/status`)).json()) as { turns: { list: unknown[] } }).turns.list.length === 0);
      const newPid = pidOf(dir);
      await stopPid(newPid);

      const opened2 = sl.socketLog.find((e) => e.socket === 2 && e.event === 'open')!;
      const closed1 = sl.socketLog.find((e) => e.socket === 1 && e.event === 'close')!;
      expect(sl.socketLog.indexOf(opened2)).toBeLessThan(sl.socketLog.indexOf(closed1));
      // Each delivery of an envelope acked once, on the socket it came by. One exception, as on
      // Slack: a delivery reaching the old socket while it closes may go unacked (the ack cannot
      // go out on a closed socket); Slack then sends it again on the open one, where it is acked.
      const on = (list: Array<{ id: string; socket: number }>, id: string, socket: number) => list.filter((e) => e.id === id && e.socket === socket).length;
      const deliveredOn = new Map(sl.sentEnvelopes.map((e) => [`${e.id} ${e.socket}`, e]));
      for (const { id, socket } of deliveredOn.values()) {
        const sent = on(sl.sentEnvelopes, id, socket);
        const acked = on(sl.ackLog, id, socket);
        if (socket === 1 && acked < sent)
          expect(on(sl.ackLog, id, 2), `${id}: left unacked by the closing socket, then acked on the new one`).toBeGreaterThan(0);
        else expect(acked, `${id} on socket ${socket}: acks per delivery`).toBe(sent);
      }
      expect(new Set(sl.ackLog.map((a) => a.id)).size).toBe(4);
      expect(sl.messages).toHaveLength(4);
      expect([...sl.texts('D0DM0001')].sort()).toEqual([...texts].sort());
    },
    scaled(60_000),
  );

  it(
    'web chat: a tab connected before the upgrade reconnects to the new process, its conversation is restored, and a new message is answered once',
    async () => {
      const dir = withTempDir('upgrade-webchat');
      const file = writeProcessConfig(dir, `${echoAgent(0)}${webchatChannel()}`);
      const old = withDaemonProcess(file);
      killRecordedDaemonAtEnd(dir);
      const url = await old.url();
      await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, 15_000);
      const tab = new ChatClient(url, 'tab-upgrade');
      await tab.opened;
      tab.send('first words', 'u1');
      expect((await tab.finals(1)).map((f) => f.text)).toEqual(['first words']);

      old.signal('SIGUSR2');
      // The old process closes the tab's socket once the new one took over (the page then reconnects).
      await tab.closed;
      expect(await old.exited).toBe(0);
      const again = new ChatClient(url, 'tab-upgrade');
      await again.opened;
      // The conversation as the tab had it: the user's message, then the reply.
      await waitFor(() => again.frames.some((f) => f.type === 'reply' && f.final), 10_000);
      expect(again.frames.map((f) => [f.type, f.text])).toEqual([
        ['message', 'first words'],
        ['reply', 'first words'],
      ]);
      again.send('second words', 'u2');
      const finals = await again.finals(2);
      expect(finals.map((f) => f.text)).toEqual(['first words', 'second words']);
      again.close();
      await stopPid(pidOf(dir));
      expect(again.replies().filter((f) => f.text === 'second words' && f.final)).toHaveLength(1);
    },
    scaled(60_000),
  );

  it(
    'web chat: answers of turns still running in the old process reach the reconnected tabs once, and tabs opened later restore them',
    async () => {
      const llm = await withLlm();
      // Both answers are held until the test lets them go: the turns run through the hand-over.
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      llm.script(
        { kind: 'stream', chunks: [{ content: 'partial ' }, { content: 'answer for A', after: released }] },
        { kind: 'stream', chunks: [{ content: 'answer for B', after: released }] },
      );
      const dir = withTempDir('upgrade-webchat-late');
      // Grace enough for a loaded machine: the turns must end in the old process, not be cut.
      const file = writeProcessConfig(dir, `${llmAgent(llm.url)}${webchatChannel()}`, 'shutdown_grace_ms = 120000\n');
      const old = withDaemonProcess(file);
      killRecordedDaemonAtEnd(dir);
      const url = await old.url();
      await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, 15_000);
      // Tab A has a draft of its answer when the upgrade starts; tab B nothing yet.
      const a = new ChatClient(url, 'tab-a');
      const b = new ChatClient(url, 'tab-b');
      await Promise.all([a.opened, b.opened]);
      a.send('question A', 'a1');
      await waitFor(() => a.replies().some((f) => f.text?.startsWith('partial')), 15_000);
      b.send('question B', 'b1');
      await waitFor(() => llm.requests.length === 2, 15_000);

      old.signal('SIGUSR2');
      await Promise.all([a.closed, b.closed]);
      const a2 = new ChatClient(url, 'tab-a');
      const b2 = new ChatClient(url, 'tab-b');
      await Promise.all([a2.opened, b2.opened]);
      // Restored from what the old process handed over: the question, and A's draft.
      await waitFor(() => a2.replies().length === 1 && b2.frames.length === 1, 10_000);
      expect(seen(a2.frames)).toEqual([
        ['message', 'question A'],
        ['reply', 'partial', false],
      ]);
      expect(seen(b2.frames)).toEqual([['message', 'question B']]);

      // The old process's turns end now, after the tabs moved to the new one.
      release();
      expect(await old.exited).toBe(0);
      expect((await a2.finals(1)).map((f) => f.text)).toEqual(['partial answer for A']);
      expect((await b2.finals(1)).map((f) => f.text)).toEqual(['answer for B']);
      // The conversation goes on in the new process (it waited for the old turn); by the time
      // its answer is here, anything the hand-over would send twice would be here too.
      a2.send('follow up', 'a2');
      expect((await a2.finals(2)).map((f) => f.text)).toEqual(['partial answer for A', 'follow up']);
      const finalsOf = (c: ChatClient, text: string) => c.replies().filter((f) => f.final && f.text === text);
      expect(finalsOf(a2, 'partial answer for A')).toHaveLength(1);
      expect(finalsOf(b2, 'answer for B')).toHaveLength(1);
      // Each question was answered by one model call, in the process that owned its turn.
      expect(llm.requests).toHaveLength(3);

      // Tabs opened later restore the whole conversation from the new process.
      const a3 = new ChatClient(url, 'tab-a');
      const b3 = new ChatClient(url, 'tab-b');
      await waitFor(() => a3.frames.length === 4 && b3.frames.length === 2, 10_000);
      expect(seen(a3.frames)).toEqual([
        ['message', 'question A'],
        ['reply', 'partial answer for A', true],
        ['message', 'follow up'],
        ['reply', 'follow up', true],
      ]);
      expect(seen(b3.frames)).toEqual([
        ['message', 'question B'],
        ['reply', 'answer for B', true],
      ]);
      for (const c of [a2, b2, a3, b3]) c.close();
      await stopPid(pidOf(dir));
    },
    scaled(90_000),
  );
});
