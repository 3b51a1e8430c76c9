import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import pg from 'pg';
import { HELD_REPLY } from '../../src/dispatch/dispatcher.js';
import { clusterSkipReason, clusterToml, PG_URL, uniqueNamespace } from '../helpers/cluster.js';
import { waitFor } from '../helpers/daemon.js';
import { withChat, withTempDir } from '../helpers/fixtures.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { scaled } from '../helpers/timing.js';
import { echoAgent, webchatChannel } from '../helpers/toml.js';

/** Longer than a JetStream publish waits (5 s): the publish fails and the message must be held. */
const OUTAGE_MS = 8_000;

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

/** A NATS server of this test's own (JetStream, its store in `dir`), so it can be taken down. */
function natsServer(port: number, dir: string): ChildProcess {
  const p = spawn('nats-server', ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', dir], { stdio: 'ignore' });
  p.on('error', () => {});
  onTestFinished(() => void p.kill('SIGKILL'));
  return p;
}

let skip: string | undefined;
beforeAll(async () => {
  // PostgreSQL is the shared one; NATS is started here, so its server binary must be at hand.
  const binary = spawnSync('nats-server', ['--version']);
  skip = binary.error ? `nats-server cannot be run here (${binary.error.message})` : await clusterSkipReason();
});

describe('cluster mode: NATS down longer than a publish waits', () => {
  it(
    `a web chat message sent during an ${OUTAGE_MS / 1000} s NATS outage is held (one notice, no ack) and answered once when NATS is back`,
    async (ctx) => {
      if (skip) ctx.skip(skip);
      const dir = withTempDir('natsout');
      const port = await freePort();
      const natsUrl = `nats://127.0.0.1:${port}`;
      let nats = natsServer(port, join(dir, 'js'));
      const ns = uniqueNamespace();
      onTestFinished(async () => {
        const client = new pg.Client({ connectionString: PG_URL });
        await client.connect();
        await client.query(`DROP SCHEMA IF EXISTS ${ns} CASCADE`).finally(() => client.end());
      });
      // The lease outlives the outage: this test is about the intake, not a hand-over.
      const file = writeProcessConfig(dir, clusterToml(ns, 'lease_ttl_ms = 60000\n') + echoAgent(0) + webchatChannel());
      const p = withDaemonProcess(file, { NATS_URL: natsUrl, PG_URL });
      const url = await p.url(60_000);
      const web = await withChat({ url }, 'tab-n');
      web.send('before', 'b');
      await waitFor(() => web.replies().some((f) => f.final && f.text === 'before'), 20_000);

      nats.kill('SIGKILL');
      await new Promise((r) => nats.once('exit', r));
      const downAt = Date.now();
      web.send('during the outage', 'd');
      await waitFor(async () => {
        const s = (await (await fetch(`${url}/status`)).json()) as { channels: Array<{ id: string; held?: number }> };
        return s.channels.find((c) => c.id === 'web')?.held === 1;
      }, scaled(20_000));
      await waitFor(() => web.replies().some((f) => f.text === HELD_REPLY), 10_000);
      expect(web.frames.some((f) => f.type === 'ack' && f.id === 'd')).toBe(false);
      const left = OUTAGE_MS - (Date.now() - downAt);
      if (left > 0) await new Promise((r) => setTimeout(r, left));
      nats = natsServer(port, join(dir, 'js'));

      await waitFor(() => web.frames.some((f) => f.type === 'ack' && f.id === 'd'), 30_000);
      await waitFor(() => web.replies().some((f) => f.final && f.text === 'during the outage'), 30_000);
      const finals = new Map(web.replies().map((f) => [f.ref, f]));
      expect([...finals.values()].filter((f) => f.text === 'during the outage')).toHaveLength(1);
      expect([...finals.values()].filter((f) => f.text === HELD_REPLY)).toHaveLength(1);
    },
    scaled(120_000),
  );
});
