import { beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { TcpGate } from '../fakes/tcp-gate.js';
import { clusterSkipReason, clusterToml, dropNamespace, NATS_URL, PG_URL, uniqueNamespace } from '../helpers/cluster.js';
import { waitFor } from '../helpers/daemon.js';
import { withChat, withTempDir } from '../helpers/fixtures.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { scaled } from '../helpers/timing.js';
import { echoAgent, webchatChannel } from '../helpers/toml.js';

let skip: string | undefined;
beforeAll(async () => {
  skip = await clusterSkipReason();
});

describe('cluster mode: PostgreSQL away when a turn starts', () => {
  // Before its turn a conversation's state is made current from PostgreSQL: an agent with a
  // daily budget reads the day's spending every turn (a new conversation, its session). That
  // read failing ended the turn before its reply existed: recorded failed, the stream message
  // acknowledged, the user never answered. Now the turn waits for the store.
  it(
    'with a daily budget, a message sent while PostgreSQL is unreachable is answered once when it is back',
    async (ctx) => {
      if (skip) ctx.skip(skip);
      const ns = uniqueNamespace();
      onTestFinished(() => dropNamespace(ns));
      const url = new URL(PG_URL);
      const gate = await new TcpGate().start(url.hostname, Number(url.port || 5432));
      onTestFinished(() => gate.close());
      url.host = `127.0.0.1:${gate.port}`;
      const dir = withTempDir('pgturn');
      const file = writeProcessConfig(dir, `${clusterToml(ns)}${echoAgent(0).trimEnd()}\ndaily_budget = 10\n\n${webchatChannel()}`);
      const p = withDaemonProcess(file, { NATS_URL, PG_URL: url.toString() });
      const base = await p.url(60_000);
      const first = await withChat({ url: base }, 'tab-a');
      first.send('warm up', 'a1');
      await waitFor(() => first.replies().some((f) => f.final && f.text === 'warm up'), 20_000);
      // The day's spending read for that turn is reused for a second (src/cluster/pg-usage.ts):
      // the next turn reads it again.
      const warmedAt = Date.now();
      await waitFor(() => Date.now() - warmedAt > 1_200);

      gate.down();
      // The conversation's preferences are known here: only the turn's own reads need PostgreSQL.
      const other = first;
      other.send('while the database is away', 'b1');
      // Stored in the stream (NATS is up) and its turn started: it now waits on PostgreSQL.
      await waitFor(() => other.frames.some((f) => f.type === 'ack' && f.id === 'b1'), 20_000);
      // Its turn met the outage before its reply existed (the build before this change gave up
      // on it there: "turn failed outside the runtime"; now it waits).
      const metOutage = ["the conversation's state cannot be read now: its turn waits for the store", 'turn failed outside the runtime'];
      await waitFor(() => p.lines.some((l) => metOutage.includes(String(l.msg))), scaled(20_000));
      gate.up();

      await waitFor(() => other.replies().some((f) => f.final && f.text === 'while the database is away'), scaled(60_000));
      const finals = new Map(other.replies().map((f) => [f.ref, f]));
      expect([...finals.values()].filter((f) => f.text === 'while the database is away')).toHaveLength(1);
      p.signal('SIGTERM');
      expect(await p.exited).toBe(0);
    },
    scaled(150_000),
  );
});
