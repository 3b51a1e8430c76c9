import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import type { ParsedCommand } from '../../../src/contracts/commands.js';
import type { ChannelAdapter } from '../../../src/contracts/channel.js';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import type { InboxItem, Topology, TopologyWork } from '../../../src/contracts/topology.js';
import { LiveConfig } from '../../../src/daemon/config-service.js';
import { openDb } from '../../../src/store/db.js';
import { Inbox } from '../../../src/store/inbox.js';
import { ClusterTopology } from '../../../src/topology/cluster/cluster-topology.js';
import { LocalTopology } from '../../../src/topology/local/local-topology.js';
import { clusterEnv, clusterSkipReason, clusterToml, dropNamespace, quietLogger, uniqueNamespace } from '../../helpers/cluster.js';
import { waitFor } from '../../helpers/daemon.js';
import { kinds } from '../../helpers/kinds.js';
import { userMessage } from '../../helpers/recording-adapter.js';

/** One implementation as the contract test sees it: a fresh topology, and how to tear it down. */
interface Impl {
  topology: Topology;
  close(): Promise<void>;
}

/** The dispatcher's side of the contract, recording what the topology asks of it. */
function recordingWork(): TopologyWork & { enqueued: InboxItem[]; controls: string[]; stops: string[] } {
  const enqueued: InboxItem[] = [];
  const controls: string[] = [];
  const stops: string[] = [];
  return {
    enqueued,
    controls,
    stops,
    enqueue: (item) => void enqueued.push(item),
    hold: () => () => {},
    knows: () => true,
    release: async () => {},
    stop: (scope) => (stops.push(scope), { cancelled: false, dropped: 1 }),
    stopTurn: () => undefined,
    runControl: async (_msg, _scope, cmd) => (controls.push(cmd.name), `ran ${cmd.name} there`),
    load: () => ({ inFlight: 0, queued: 0 }),
  };
}

const adapter = { selfId: 'bot', selfName: 'bot' } as unknown as ChannelAdapter;
const approve: ParsedCommand = { name: 'approve', args: 'abc123' };
const scopeOf = (m: ChannelMessage) => `${m.channelId}:${m.chat.id}`;

/** What the dispatcher, lanes and daemon rely on, the same for every topology. */
function contract(name: string, make: () => Promise<Impl>) {
  describe(`topology contract: ${name}`, () => {
    let impl: Impl | undefined;
    afterEach(async () => {
      await impl?.close();
      impl = undefined;
    });

    it('intake: a message is stored once; its redelivery is a duplicate; a batch settles one result per message, in order', async () => {
      impl = await make();
      const { intake } = impl.topology;
      expect(intake.writable).toBe(true);
      const m = userMessage('t', 'hello');
      const first = await intake.receive({ msg: m, scope: scopeOf(m), passive: [] });
      expect(first === 'stored' || (typeof first === 'object' && first.run.message.messageId === m.messageId)).toBe(true);
      expect(await intake.receive({ msg: m, scope: scopeOf(m), passive: [] })).toBe('duplicate');
      const batch = [userMessage('t', 'a'), userMessage('t', 'b')].map((msg) => ({ msg, scope: scopeOf(msg), passive: [] }));
      const results = await intake.receiveBatch(batch);
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled']);
    });

    it('recovery: a stored, unanswered message comes back to this instance’s work (recover, or serve)', async () => {
      impl = await make();
      const t = impl.topology;
      const m = userMessage('t', 'left over');
      await t.intake.receive({ msg: m, scope: scopeOf(m), passive: [] });
      const work = recordingWork();
      const recovered = t.recover();
      const stop = await t.serve(work);
      try {
        const found = await waitFor(() => [...recovered, ...work.enqueued].find((i) => i.message.messageId === m.messageId), 15_000);
        expect(found.scope).toBe(scopeOf(m));
        expect(found.state).toBe('pending');
        // Fencing: the instance that runs it may write for its scope.
        expect(t.fenceOf(found.scope).aborted).toBe(false);
      } finally {
        await stop();
      }
    });

    it('control routing: a control runs once, here or where its turn is served; a redelivery does nothing', async () => {
      impl = await make();
      const t = impl.topology;
      const work = recordingWork();
      const stop = await t.serve(work);
      try {
        const m = userMessage('t', '/approve abc123');
        let here = 0;
        const run = async () => (here++, 'ran approve here');
        const reply = await t.controls.control(m, scopeOf(m), approve, run);
        expect(here + work.controls.length).toBe(1);
        expect(reply).toMatch(/^ran approve/);
        expect(await t.controls.control(m, scopeOf(m), approve, run)).toBe('duplicate');
        expect(here + work.controls.length).toBe(1);
      } finally {
        await stop();
      }
    });

    it('control routing: /stop acts once (a redelivery is a duplicate); the operator’s stop finds a turn running here', async () => {
      impl = await make();
      const t = impl.topology;
      const m = userMessage('t', '/stop');
      const order = { senderId: m.sender.id, runningOfAnyone: false };
      const here = () => ({ cancelled: false, dropped: 1 });
      const first = await t.controls.stop(m, scopeOf(m), order, here);
      expect(typeof first).toBe('object');
      expect(first).not.toBe('duplicate');
      expect(await t.controls.stop(m, scopeOf(m), order, here)).toBe('duplicate');
      expect(await t.controls.stopTurn('1', () => 'cancelled')).toBe('cancelled');
    });

    it('listeners, fencing, state and status: every member answers', async () => {
      impl = await make();
      const t = impl.topology;
      expect(t.gate({ id: 't', exclusive: false, parts: 1 }, adapter)).toBe(adapter);
      expect(t.gate({ id: 't', exclusive: true, parts: 1 }, adapter)).toBeTypeOf('object');
      expect(t.fenceOf('t:nobody').aborted).toBe(false);
      await t.state.prepare('t:chat-1', 't');
      await t.state.whenWritable(AbortSignal.timeout(5000));
      expect(t.intake.duplicateWindowMs()).toBeGreaterThan(0);
      const status = t.status();
      if (status) expect(status.partitions.total).toBeGreaterThan(0);
      // A channel's shared records: none on one node, where the only instance keeps its own files.
      const records = t.sharedRecords('t');
      if (!status) expect(records).toBeUndefined();
      else {
        const rec = records!('contract');
        await rec.write('kept for every instance', AbortSignal.timeout(5000));
        expect(await rec.read(AbortSignal.timeout(5000))).toBe('kept for every instance');
      }
    });
  });
}

contract('local (SQLite)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'topology-'));
  const db = openDb(join(dir, 'channeld.db'));
  return {
    topology: new LocalTopology(new Inbox(db)),
    close: async () => {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

const skip = await clusterSkipReason();
if (skip === undefined) {
  contract('cluster (NATS JetStream + PostgreSQL)', async () => {
    const ns = uniqueNamespace();
    const toml = `${clusterToml(ns, 'partitions = 2\nlease_ttl_ms = 2000')}`;
    const live = new LiveConfig(parseConfig(toml, '/tmp/daemon.config.toml', kinds, clusterEnv), clusterEnv);
    const { log } = quietLogger();
    const hardStop = new AbortController();
    const topology = await ClusterTopology.open(live, log, hardStop.signal);
    return {
      topology,
      close: async () => {
        await topology.close();
        hardStop.abort();
        await dropNamespace(ns);
      },
    };
  });
} else {
  describe.skip(`topology contract: cluster (skipped: ${skip})`, () => {
    it('needs NATS and PostgreSQL', () => {});
  });
}
