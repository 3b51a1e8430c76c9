import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { afterEach, describe, expect, it } from 'vitest';
import { envelopeOf } from '../../../src/cluster/reply-relay.js';
import { parseConfig } from '../../../src/config/load.js';
import type { ChannelAdapter, RelayedReply } from '../../../src/contracts/channel.js';
import type { ReplyTarget } from '../../../src/contracts/message.js';
import { LiveConfig } from '../../../src/daemon/config-service.js';
import { openDb } from '../../../src/store/db.js';
import { Inbox } from '../../../src/store/inbox.js';
import { ClusterTopology } from '../../../src/topology/cluster/cluster-topology.js';
import { LocalTopology } from '../../../src/topology/local/local-topology.js';
import { clusterEnv, clusterSkipReason, clusterToml, dropNamespace, NATS_URL, quietLogger, uniqueNamespace } from '../../helpers/cluster.js';
import { waitFor } from '../../helpers/daemon.js';
import { kinds } from '../../helpers/kinds.js';

/** An adapter whose connections are instance-local: records its own calls and what is relayed to it. */
function localConnections(name: string) {
  const calls: string[] = [];
  const relayed: RelayedReply[] = [];
  let n = 0;
  const adapter: ChannelAdapter = {
    id: 'pg',
    selfId: 'bot',
    capabilities: { maxMessageLength: 1000, editsDrafts: true, minEditIntervalMs: 0, nativeStream: false, typing: true },
    async listen(_deliver, signal, onConnected) {
      onConnected();
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    },
    async send(target, text) {
      calls.push(`send ${text}`);
      return { chatId: target.chatId, messageId: `${name}-${++n}` };
    },
    async edit(_ref, text) {
      calls.push(`edit ${text}`);
    },
    async delete(ref) {
      calls.push(`delete ${ref.messageId}`);
    },
    async typing() {
      calls.push('typing');
    },
    async finalize(refs) {
      calls.push(`finalize ${refs.length}`);
    },
    applyRelayed: (reply) => void relayed.push(reply),
  };
  return { adapter, calls, relayed };
}

const target: ReplyTarget = { channelId: 'pg', chatId: 'tab-1', chatType: 'dm' };
const spec = { id: 'pg', exclusive: false, parts: 1 };

describe('reply relay of a channel with instance-local connections', () => {
  it('one node: the adapter as it is (nothing to relay to)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'relay-'));
    const db = openDb(join(dir, 'channeld.db'));
    try {
      const { adapter } = localConnections('x');
      expect(new LocalTopology(new Inbox(db)).gate(spec, adapter)).toBe(adapter);
    } finally {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses what is not a relayed operation', () => {
    const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
    expect(envelopeOf(new TextEncoder().encode('not json'))).toBeUndefined();
    expect(envelopeOf(enc({ from: 'a', reply: { op: 'edit', ref: { chatId: 'c' }, text: 't', final: true } }))).toBeUndefined();
    expect(envelopeOf(enc({ from: 'a', reply: { op: 'send', target, messageId: 'm', text: 't', final: false, buttons: [{ label: 1 }] } }))).toBeUndefined();
    expect(envelopeOf(enc({ from: 'a', reply: { op: 'explode' } }))).toBeUndefined();
    expect(envelopeOf(enc({ from: 'a', reply: { op: 'delete', ref: { chatId: 'c', messageId: 'm' } } }))?.reply.op).toBe('delete');
  });
});

const skip = await clusterSkipReason();
describe.skipIf(skip !== undefined)(`reply relay between two cluster instances${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  const instance = async (ns: string, id: string) => {
    const toml = clusterToml(ns, `partitions = 2\nlease_ttl_ms = 2000\ninstance_id = "${id}"`);
    const live = new LiveConfig(parseConfig(toml, '/tmp/daemon.config.toml', kinds, clusterEnv), clusterEnv);
    const hardStop = new AbortController();
    const topology = await ClusterTopology.open(live, quietLogger().log, hardStop.signal);
    closers.push(async () => {
      await topology.close();
      hardStop.abort();
    });
    return topology;
  };

  it('each operation made where the turn runs is applied there by the adapter and, once, in order, by every other listening instance; not after its listener stopped', async () => {
    const ns = uniqueNamespace();
    closers.push(() => dropNamespace(ns));
    const [ta, tb] = [await instance(ns, 'ia'), await instance(ns, 'ib')];
    const a = localConnections('a');
    const b = localConnections('b');
    const ga = ta.gate(spec, a.adapter);
    const gb = tb.gate(spec, b.adapter);
    const listening = [ga, gb].map((g) => {
      const stop = new AbortController();
      const done = g.listen(
        async () => true,
        stop.signal,
        () => {},
      );
      return { stop, done };
    });
    closers.push(async () => {
      for (const l of listening) l.stop.abort();
      await Promise.all(listening.map((l) => l.done));
    });
    const signal = AbortSignal.timeout(5000);
    // Until b's subscription is known to the server, an operation may pass it by: typing until one arrives.
    await waitFor(async () => (await ga.typing(target, { signal }), b.relayed.length > 0), 10_000, 20);
    b.relayed.length = 0;

    const ref = await ga.send(target, 'draft', { signal, buttons: [{ label: 'Yes', data: '/approve x' }] });
    await ga.edit(ref, 'final text', { signal, final: true });
    await ga.finalize!([ref], { signal });
    await ga.delete(ref, { signal });
    // A typing of the wait above may still arrive: the reply's own operations are what count.
    const replyOps = () => b.relayed.filter((r) => r.op !== 'typing');
    await waitFor(() => replyOps().length === 4, 10_000, 10);
    expect(ref.messageId).toBe('a-1');
    expect(replyOps()).toEqual([
      { op: 'send', target, messageId: 'a-1', text: 'draft', final: false, buttons: [{ label: 'Yes', data: '/approve x' }] },
      { op: 'edit', ref, text: 'final text', final: true },
      { op: 'finalize', refs: [ref] },
      { op: 'delete', ref },
    ]);
    expect(a.calls.slice(-4)).toEqual(['send draft', 'edit final text', 'finalize 1', 'delete a-1']);
    // Nothing comes back to the instance that made it, and b's own adapter made no call.
    expect(a.relayed).toEqual([]);
    expect(b.calls).toEqual([]);

    // b's listener stops: its subscription goes with it.
    listening[1]!.stop.abort();
    await listening[1]!.done;
    // A publish leaves a's connection some time after send() returns: an observer of the
    // relay subject shows when the server has it, so b's next subscription comes after it
    // (otherwise b's new subscription may reach the server first and rightly receive it).
    const observer = await connect({ servers: NATS_URL });
    closers.push(() => observer.close());
    const seen: string[] = [];
    observer.subscribe(`${ns}.relay.>`, { callback: (_err, msg) => void seen.push(msg.string()) });
    await observer.flush();
    await ga.send(target, 'while b is stopped', { signal });
    await waitFor(() => seen.some((m) => m.includes('while b is stopped')), 10_000, 10);
    const again = new AbortController();
    const relisten = gb.listen(
      async () => true,
      again.signal,
      () => {},
    );
    closers.push(async () => {
      again.abort();
      await relisten;
    });
    b.relayed.length = 0;
    await waitFor(async () => (await ga.typing(target, { signal }), b.relayed.length > 0), 10_000, 20);
    // What was sent while b did not listen never reaches it.
    expect(b.relayed.every((r) => r.op === 'typing')).toBe(true);
  });
});
