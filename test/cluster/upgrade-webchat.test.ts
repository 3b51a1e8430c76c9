import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { clusterEnv, clusterSkipReason, clusterToml, dropNamespace, uniqueNamespace } from '../helpers/cluster.js';
import { waitFor } from '../helpers/daemon.js';
import { withLlm, withTempDir } from '../helpers/fixtures.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { scaled } from '../helpers/timing.js';
import { llmAgent, webchatChannel } from '../helpers/toml.js';
import { gone, pidOf, stopPid } from '../helpers/upgrade.js';
import { ChatClient, seen } from '../helpers/webchat-client.js';

const skip = await clusterSkipReason();

describe.skipIf(skip !== undefined)(`cluster rolling upgrade, web chat, real processes${skip ? ` (skipped: ${skip})` : ''}`, () => {
  it(
    'SIGUSR2 on an instance: its web chat tabs reconnect to the new process with their history, and answers of turns still running in the old one reach them once',
    async () => {
      const llm = await withLlm();
      const dir = withTempDir('cluster-upgrade-webchat');
      const ns = uniqueNamespace();
      onTestFinished(async () => {
        // The new process is not the test's child: stop it by pid, then drop the namespace.
        try {
          const pid = pidOf(dir);
          process.kill(pid, 'SIGKILL');
          await waitFor(() => gone(pid), 15_000);
        } catch {}
        await dropNamespace(ns);
      });
      // No instance_id: the new process joins under a default id of its own (host and pid).
      // Grace enough for a loaded machine: the held turns must end in the old process, not be
      // cut; and leases that outlive a stalled event loop there (a fenced partition would run
      // its held turn again elsewhere: this test is about the tabs, not a takeover).
      const file = writeProcessConfig(dir, clusterToml(ns, 'lease_ttl_ms = 10000\n') + llmAgent(llm.url) + webchatChannel(), 'shutdown_grace_ms = 120000\n');
      const old = withDaemonProcess(file, clusterEnv);
      // CHANNELD_CLUSTER_LOGS=<dir> keeps both processes' log lines there (the new one logs to the same pipe).
      onTestFinished(() => {
        const keep = process.env.CHANNELD_CLUSTER_LOGS;
        if (!keep) return;
        mkdirSync(keep, { recursive: true });
        writeFileSync(join(keep, 'upgrade-webchat.jsonl'), old.lines.map((l) => JSON.stringify(l)).join('\n'));
      });
      const url = await old.url(60_000);
      await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, 30_000);

      // Tab A has a conversation before the upgrade (the fake model echoes by default).
      const a = new ChatClient(url, 'tab-a');
      const b = new ChatClient(url, 'tab-b');
      await Promise.all([a.opened, b.opened]);
      a.send('first words', 'a1');
      expect((await a.finals(1, 30_000)).map((f) => f.text?.trimEnd())).toEqual(['first words']);

      // Then both answers are held until the test lets them go: the turns run through the hand-over.
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      llm.script(
        { kind: 'stream', chunks: [{ content: 'partial ' }, { content: 'answer for A', after: released }] },
        { kind: 'stream', chunks: [{ content: 'answer for B', after: released }] },
      );
      a.send('question A', 'a2');
      await waitFor(() => a.replies().some((f) => f.text?.startsWith('partial')), 30_000);
      b.send('question B', 'b1');
      await waitFor(() => llm.requests.length === 3, 30_000);

      old.signal('SIGUSR2');
      // The old process closes the tabs' sockets once the new one took over; they reconnect
      // on the same port (the listening socket was handed over), so to the new process.
      await Promise.all([a.closed, b.closed]);
      const a2 = new ChatClient(url, 'tab-a');
      const b2 = new ChatClient(url, 'tab-b');
      await Promise.all([a2.opened, b2.opened]);
      await waitFor(() => a2.frames.length >= 4 && b2.frames.length >= 1, 10_000);
      expect(seen(a2.frames)).toEqual([
        ['message', 'first words'],
        ['reply', 'first words', true],
        ['message', 'question A'],
        ['reply', 'partial', false],
      ]);
      expect(seen(b2.frames)).toEqual([['message', 'question B']]);

      // The old process's turns end now, after the tabs moved to the new one.
      release();
      expect(await old.exited).toBe(0);
      const newPid = pidOf(dir);
      expect(newPid).not.toBe(old.child.pid);
      expect((await a2.finals(2, 30_000)).map((f) => f.text)).toEqual(['first words', 'partial answer for A']);
      expect((await b2.finals(1, 30_000)).map((f) => f.text)).toEqual(['answer for B']);
      // The conversation goes on in the new process; by the time its answer is here, anything
      // the hand-over would send twice would be here too.
      a2.send('follow up', 'a3');
      expect((await a2.finals(3, 30_000)).map((f) => f.text)).toEqual(['first words', 'partial answer for A', 'follow up']);
      const finalsOf = (c: ChatClient, text: string) => c.replies().filter((f) => f.final && f.text === text);
      expect(finalsOf(a2, 'partial answer for A')).toHaveLength(1);
      expect(finalsOf(b2, 'answer for B')).toHaveLength(1);
      // Each question was answered by one model call, in the process that owned its turn.
      expect(llm.requests).toHaveLength(4);

      // A tab opened later restores the whole conversation from the new process.
      const a3 = new ChatClient(url, 'tab-a');
      await waitFor(() => a3.frames.length >= 6, 10_000);
      expect(seen(a3.frames)).toEqual([
        ['message', 'first words'],
        ['reply', 'first words', true],
        ['message', 'question A'],
        ['reply', 'partial answer for A', true],
        ['message', 'follow up'],
        ['reply', 'follow up', true],
      ]);
      for (const c of [a2, b2, a3]) c.close();
      await stopPid(newPid);
    },
    scaled(120_000),
  );
});
