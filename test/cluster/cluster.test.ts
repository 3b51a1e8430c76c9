import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { partitionOf } from '../../src/cluster/partition-key.js';
import { formatStatus } from '../../src/actions/builtin/status.js';
import { STOP_MARKER } from '../../src/stream/reply-stream.js';
import { FakeTelegram } from '../fakes/telegram/server.js';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withLlm } from '../helpers/fixtures.js';
import { llmAgent } from '../helpers/toml.js';
import { jetstreamManager } from '@nats-io/jetstream';
import pg from 'pg';
import { clusterEnv, clusterSkipReason, clusterToml, dropNamespace, PG_URL, uniqueNamespace, withNats } from '../helpers/cluster.js';

const skip = await clusterSkipReason();

const escapeRe = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** A stopped answer as a whole text: its first words, then the stop marker. */
const stoppedAnswer = (first: string) => expect.stringMatching(new RegExp(`^${escapeRe(first)}\\b[\\s\\S]*${escapeRe(STOP_MARKER)}$`));

describe.skipIf(skip !== undefined)(`cluster mode, two in-process instances${skip ? ` (skipped: ${skip})` : ''}`, () => {
  const namespaces: string[] = [];
  let tg: FakeTelegram | undefined;
  let daemons: TestDaemon[] = [];
  afterEach(async () => {
    await Promise.all(daemons.map((d) => d.stop().catch(() => {})));
    daemons = [];
    await tg?.close();
    tg = undefined;
  });
  afterAll(async () => {
    for (const ns of namespaces) await dropNamespace(ns);
  });

  /**
   * `n` instances started one after another; with `settleEach`, each has its share before the
   * next starts. Their agent is the echo one (`echoMs` between words) unless `agent` gives its table.
   */
  const cluster = async (n: number, echoMs: number, partitions = 8, settleEach = false, daemonExtra = '', agent?: string) => {
    const ns = uniqueNamespace();
    namespaces.push(ns);
    tg = new FakeTelegram();
    await tg.start();
    const body = (id: string) =>
      `${clusterToml(ns, `instance_id = "${id}"\nlease_ttl_ms = 1500\npartitions = ${partitions}`)}${agent ?? `[agent]\nprovider = "echo"\necho_delay_ms = ${echoMs}\n\n`}[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG_TOKEN"\napi_root = "${tg!.url}"\nallow_from = ["*"]\nnative_drafts = false\n`;
    // Every partition is owned, shared out evenly between the instances.
    const shared = () =>
      waitFor(() => {
        const owned = daemons.map((d) => d.daemon.status().cluster!.partitions.owned);
        return owned.flat().length === partitions && owned.every((o) => o.length >= Math.floor(partitions / daemons.length));
      }, 20_000);
    for (let i = 0; i < n; i++) {
      daemons.push(await startDaemon(body(`i${i}`), { TG_TOKEN: tg.token, ...clusterEnv }, daemonExtra));
      if (settleEach) await shared();
    }
    await shared();
    return daemons;
  };

  /**
   * The instance that polls Telegram (`listener`), the other one, and `onOther(first, step)`:
   * the chat ids from `first` on (stepping by `step`; -1 for groups' negative ids) whose
   * conversations run on the other instance.
   */
  const roles = async (a: TestDaemon, b: TestDaemon) => {
    const listener = await waitFor(() => [a, b].find((d) => d.daemon.status().channels[0]!.state === 'connected'), 10_000);
    const other = listener === a ? b : a;
    const parts = other.daemon.status().cluster!.partitions.owned;
    const onOther = (first: number, step = 1) =>
      Array.from({ length: 100 }, (_, i) => first + step * i).filter((n) => parts.includes(partitionOf(`tg:${n}`, 8)));
    return { listener, other, onOther };
  };

  it('one instance polls Telegram; every message is answered once, in order per conversation; /status shows the cluster', async () => {
    const [a, b] = await cluster(2, 5);
    await waitFor(
      () =>
        a!.daemon
          .status()
          .channels.concat(b!.daemon.status().channels)
          .some((c) => c.state === 'connected'),
      10_000,
    );
    const states = [a!, b!].map((d) => d.daemon.status().channels[0]!.state).sort();
    expect(states).toEqual(['connected', 'standby']);
    const users = Array.from({ length: 12 }, (_, i) => ({ id: 1000 + i, first_name: `u${i}` }));
    for (let round = 0; round < 3; round++) for (const u of users) tg!.dm(`m${round} from ${u.id}`, u);
    const expected = (id: number) => JSON.stringify([0, 1, 2].map((r) => `m${r} from ${id}`));
    await waitFor(() => users.every((u) => JSON.stringify(tg!.texts(u.id)) === expected(u.id)), 20_000);
    // Exactly once: no extra message appears (every send is counted by the fake).
    expect(tg!.callsOf('sendMessage')).toHaveLength(36);
    // Both instances ran turns: the partitions are shared.
    const st = a!.daemon.status().cluster!;
    expect(st.instances.map((i) => i.id).sort()).toEqual(['i0', 'i1']);
    expect(st.instances.every((i) => i.alive && i.generation === 1)).toBe(true);
    expect(st.leases.find((l) => l.key === 'listener.tg')?.owner).toMatch(/^i[01]$/);
    expect(st.ops.natsPublishes).toBeGreaterThan(0);
    // `channeld status` prints the instances with their leases.
    const text = formatStatus(a!.daemon.status());
    expect(text).toMatch(/INSTANCE +ALIVE +GENERATION +RUNNING +QUEUED +LEASES/);
    expect(text).toMatch(/i0.* yes +1 /);
    expect(text).toContain('listener.tg');
    // A reload is per instance; the other instances see its new generation.
    await b!.daemon.reload();
    await waitFor(() => a!.daemon.status().cluster!.instances.find((i) => i.id === 'i1')?.generation === 2, 10_000);
    expect(a!.daemon.status().generation).toBe(1);
  });

  it('instances joining one by one share the partitions evenly: 10 over 3 is 4/3/3, never 4/4/2', async () => {
    // 10, then 5/5, then each gives up its surplus: with everyone aiming at ceil(10 / 3) = 4
    // that stopped at 4/4/2 (no surplus anywhere, and the newcomer short of its share).
    const all = await cluster(3, 5, 10, true);
    expect(all.map((d) => d.daemon.status().cluster!.partitions.owned.length).sort()).toEqual([3, 3, 4]);
  });

  it("/status received by one instance shows the conversation's stored session from the other, and creates none", async () => {
    const [a, b] = await cluster(2, 5);
    const ns = namespaces.at(-1)!;
    const { listener, other: owner, onOther } = await roles(a!, b!);
    // Two users whose conversations run on the instance that does not poll Telegram.
    const [id, fresh] = onOther(5000);
    const user = { id: id!, first_name: 'Remote' };
    const sessionRows = async (scope: string) => {
      const client = new pg.Client({ connectionString: PG_URL });
      await client.connect();
      const { rows } = await client.query(`SELECT created_at FROM ${ns}.sessions WHERE scope = $1`, [scope]).finally(() => client.end());
      return rows.map((r: { created_at: string }) => Number(r.created_at));
    };
    tg!.dm('first', user);
    await waitFor(() => tg!.texts(id!).includes('first'), 10_000);
    tg!.dm('second', user);
    await waitFor(() => tg!.texts(id!).includes('second'), 10_000);
    const [createdAt] = await waitFor(async () => {
      const rows = await sessionRows(`tg:${id}`);
      return rows.length ? rows : undefined;
    }, 10_000);
    const session = `Session: 2 turn(s) since ${new Date(createdAt!).toISOString()}`;
    // The listener receives it; the owner of the conversation's partition answers what it stored.
    tg!.dm('/status', user);
    await waitFor(() => tg!.texts(id!).length === 3, 10_000);
    expect(tg!.texts(id!)[2]).toContain(session);
    // Nobody has a session for `fresh`: asking says so and stores none (a status read writes no session).
    tg!.dm('/status', { id: fresh!, first_name: 'Fresh' });
    await waitFor(() => tg!.texts(fresh!).length === 1, 10_000);
    expect(tg!.texts(fresh!)[0]).toContain('Session: none stored yet');
    // The owner goes: the listener takes the partition over and reads the same session from PostgreSQL.
    await owner.stop();
    daemons = [listener];
    await waitFor(() => listener.daemon.status().cluster!.partitions.owned.length === 8, 15_000);
    tg!.dm('/status', user);
    await waitFor(() => tg!.texts(id!).length === 4, 10_000);
    expect(tg!.texts(id!)[3]).toContain(session);
    expect(await sessionRows(`tg:${fresh}`)).toEqual([]);
  });

  it('/stop received by one instance stops the turn running on the other', async () => {
    const [a, b] = await cluster(2, 150);
    const { listener, other, onOther } = await roles(a!, b!);
    // A user whose conversation runs on the instance that does not poll Telegram.
    const id = onOther(2000)[0]!;
    const user = { id, first_name: 'Remote' };
    tg!.dm(Array.from({ length: 60 }, (_, i) => `w${i}`).join(' '), user);
    await waitFor(() => other.daemon.status().turns.list.some((t) => t.state === 'running'), 10_000);
    await waitFor(() => tg!.texts(id).length === 1, 10_000);
    tg!.dm('/stop', user);
    await waitFor(() => tg!.texts(id)[0]!.endsWith(STOP_MARKER), 5000);
    await waitFor(() => other.daemon.status().turns.in_flight === 0, 5000);
    // Answered after whatever the /stop sent: the whole list is then final.
    tg!.dm('sentinel', user);
    await waitFor(() => tg!.texts(id).includes('sentinel'), 10_000);
    // As on one node, the stopped answer's marker is the one visible result: no "Stopped." besides.
    expect(tg!.texts(id)).toEqual([stoppedAnswer('w0'), 'sentinel']);
    expect(listener.logs.text).not.toContain('/stop from another instance');
    expect(other.logs.text).toContain('/stop from another instance');
  });

  it("in a group, a member's /stop sent through one instance leaves another member's answer running on the other; its starter's stops it", async () => {
    const [a, b] = await cluster(2, 150);
    const { other, onOther } = await roles(a!, b!);
    // A group whose conversation runs on the instance that does not poll Telegram.
    const chatId = onOther(-1001000, -1)[0]!;
    const ada = { id: 43, first_name: 'Ada' };
    const bob = { id: 44, first_name: 'Bob' };
    const stop = `/stop@${tg!.bot.username}`;
    const question = Array.from({ length: 60 }, (_, i) => `w${i}`).join(' ');
    tg!.group(question, { chatId, from: ada, mention: true });
    await waitFor(() => other.daemon.status().turns.list.some((t) => t.state === 'running'), 10_000);
    await waitFor(() => tg!.texts(chatId).length === 1, 10_000);
    // Bob started nothing and is no admin: his /stop stopped Ada's answer before (the cluster ignored who sent it).
    tg!.group(stop, { chatId, from: bob, command: true });
    await waitFor(() => tg!.texts(chatId).includes('Nothing to stop.'), 10_000);
    expect(tg!.texts(chatId)[0]).not.toContain(STOP_MARKER);
    expect(other.daemon.status().turns.list.some((t) => t.state === 'running')).toBe(true);
    tg!.group(stop, { chatId, from: ada, command: true });
    await waitFor(() => tg!.texts(chatId)[0]!.endsWith(STOP_MARKER), 10_000);
    await waitFor(() => other.daemon.status().turns.in_flight === 0, 5000);
    // Answered after whatever Ada's /stop sent: the whole list is then final.
    tg!.group('sentinel', { chatId, from: bob, mention: true });
    const sentinel = `@${tg!.bot.username} sentinel`;
    await waitFor(() => tg!.texts(chatId).includes(sentinel), 10_000);
    expect(tg!.texts(chatId)).toEqual([stoppedAnswer(`@${tg!.bot.username}`), 'Nothing to stop.', sentinel]);
    expect(tg!.texts(chatId)[0]).not.toContain('w59');
    expect(other.logs.text).toContain('/stop from another instance');
  });

  it("in a group, a bare /stop (no command entity, no mention) received by one instance stops its sender's answer running on the other; anyone else's stays context", async () => {
    const [a, b] = await cluster(2, 150);
    const { other, onOther } = await roles(a!, b!);
    const chatId = onOther(-1003000, -1)[0]!;
    const ada = { id: 43, first_name: 'Ada' };
    const bob = { id: 44, first_name: 'Bob' };
    tg!.group(Array.from({ length: 60 }, (_, i) => `w${i}`).join(' '), { chatId, from: ada, mention: true });
    await waitFor(() => tg!.texts(chatId).length === 1, 10_000);
    // Bob has no turn anywhere: his is context, answered by nothing.
    tg!.group('/stop', { chatId, from: bob });
    // Before, Ada's was context too: the instance that received it runs none of her turns.
    tg!.group('/stop', { chatId, from: ada });
    await waitFor(() => tg!.texts(chatId)[0]!.endsWith(STOP_MARKER), 10_000);
    await waitFor(() => other.daemon.status().turns.in_flight === 0, 5000);
    tg!.group('sentinel', { chatId, from: bob, mention: true });
    const sentinel = `@${tg!.bot.username} sentinel`;
    await waitFor(() => tg!.texts(chatId).includes(sentinel), 10_000);
    expect(tg!.texts(chatId)).toEqual([stoppedAnswer(`@${tg!.bot.username}`), sentinel]);
    expect(other.logs.entries().filter((e) => e.msg === 'bare /stop from another instance')).toEqual([
      expect.objectContaining({ cancelled: true, dropped: 0 }),
    ]);
  });

  it("a /stop while the conversation's partition is handed back ends its running turn and queued message there: the marker, no full answer from the next owner", async () => {
    // A 60 s grace: the hand-back waits that long for the running turn (120 words 250 ms apart).
    const [a, b] = await cluster(2, 250, 8, false, 'shutdown_grace_ms = 60000');
    const ns = namespaces.at(-1)!;
    const { other, onOther } = await roles(a!, b!);
    const chatId = onOther(-1002000, -1)[0]!;
    const partition = partitionOf(`tg:${chatId}`, 8);
    const ada = { id: 43, first_name: 'Ada' };
    const bob = { id: 44, first_name: 'Bob' };
    tg!.group(Array.from({ length: 120 }, (_, i) => `w${i}`).join(' '), { chatId, from: ada, mention: true });
    tg!.group('queued question', { chatId, from: ada, mention: true });
    await waitFor(() => {
      const list = other.daemon.status().turns.list;
      return list.some((t) => t.state === 'running') && list.some((t) => t.state === 'queued');
    }, 10_000);
    await waitFor(() => tg!.texts(chatId).length === 1, 10_000);
    // The partition's consumer is deleted (an operator's `nats consumer rm`): its owner hands it
    // back, its running turn given the grace, and nobody else owns it meanwhile.
    await withNats(async (nc) => expect(await (await jetstreamManager(nc)).consumers.delete(`${ns}_inbox`, `p${partition}`)).toBe(true));
    await waitFor(() => other.logs.text.includes('partition consumer stopped delivering'), 10_000);
    // The hand-back released the queued question from the lanes (left for the next owner).
    await waitFor(() => {
      const list = other.daemon.status().turns.list;
      return list.some((t) => t.state === 'running') && !list.some((t) => t.state === 'queued');
    }, 10_000);
    tg!.group(`/stop@${tg!.bot.username}`, { chatId, from: ada, command: true });
    // Before, nobody answered: "Nothing to stop.", and the answer ran on to its end.
    await waitFor(() => tg!.texts(chatId)[0]!.endsWith(STOP_MARKER) || tg!.texts(chatId).includes('Nothing to stop.'), 10_000);
    expect(tg!.texts(chatId)).toEqual([stoppedAnswer(`@${tg!.bot.username}`)]);
    await waitFor(() => other.logs.text.includes('partition handed back'), 10_000);
    // Answered after the partition's next owner has taken it: the stopped turn and the dropped
    // question would come before it, had they been run again.
    tg!.group('sentinel', { chatId, from: bob, mention: true });
    const sentinel = `@${tg!.bot.username} sentinel`;
    await waitFor(() => tg!.texts(chatId).includes(sentinel), 20_000);
    expect(tg!.texts(chatId)).toEqual([stoppedAnswer(`@${tg!.bot.username}`), sentinel]);
    const served = other.logs.entries().find((e) => e.msg === '/stop from another instance');
    expect(served).toMatchObject({ handingBack: true, cancelled: true, dropped: 1, releasedDropped: 1 });
  });

  it("a /stop after a hand-back's turns ended, while their writes still commit, drops the queued message it released: the next owner does not answer it", async () => {
    const llm = await withLlm();
    // The first answer is held until the hand-back has begun; after it the fake echoes the last user message.
    let releaseAnswer!: () => void;
    const answerHeld = new Promise<void>((r) => (releaseAnswer = r));
    const [a, b] = await cluster(2, 0, 8, false, 'shutdown_grace_ms = 60000', llmAgent(llm.url));
    const ns = namespaces.at(-1)!;
    const { other, onOther } = await roles(a!, b!);
    const chatId = onOther(-1004000, -1)[0]!;
    const partition = partitionOf(`tg:${chatId}`, 8);
    const ada = { id: 43, first_name: 'Ada' };
    const bob = { id: 44, first_name: 'Bob' };
    const mention = `@${tg!.bot.username}`;
    const words = Array.from({ length: 20 }, (_, i) => `w${i}`).join(' ');
    llm.script({ kind: 'stream', chunks: [{ content: `${mention} ` }, { content: words, after: answerHeld }] });
    tg!.group(words, { chatId, from: ada, mention: true });
    tg!.group('queued question', { chatId, from: ada, mention: true });
    await waitFor(() => other.daemon.status().turns.list.some((t) => t.state === 'queued'), 10_000);
    // The items table is locked: the hand-back's last writes (the answered turn's state) wait.
    const lock = new pg.Client({ connectionString: PG_URL });
    await lock.connect();
    try {
      await lock.query('BEGIN');
      await lock.query(`LOCK TABLE ${ns}.items IN EXCLUSIVE MODE`);
      await withNats(async (nc) => expect(await (await jetstreamManager(nc)).consumers.delete(`${ns}_inbox`, `p${partition}`)).toBe(true));
      await waitFor(() => other.logs.text.includes('partition consumer stopped delivering'), 10_000);
      releaseAnswer();
      // The answer ends within the grace; the hand-back then waits for its writes.
      await waitFor(() => tg!.texts(chatId)[0]?.endsWith('w19') && other.daemon.status().turns.in_flight === 0, 15_000);
      expect(other.logs.text).not.toContain('partition handed back');
      tg!.group(`/stop@${tg!.bot.username}`, { chatId, from: ada, command: true });
      // Before: nobody answered ("Nothing to stop."), and the next owner answered the question.
      await waitFor(() => tg!.texts(chatId).length === 2, 10_000);
      expect(tg!.texts(chatId)[1]).toBe('Stopped.');
    } finally {
      await lock.query('ROLLBACK').finally(() => lock.end());
    }
    await waitFor(() => other.logs.text.includes('partition handed back'), 15_000);
    tg!.group('sentinel', { chatId, from: bob, mention: true });
    await waitFor(() => tg!.texts(chatId).includes(`${mention} sentinel`), 20_000);
    expect(tg!.texts(chatId)).toEqual([expect.stringMatching(/w19$/), 'Stopped.', `${mention} sentinel`]);
  });

  it("the operator's stop-turn sent to one instance stops the turn running on another, and drops one queued there", async () => {
    const [a, b] = await cluster(2, 150);
    await waitFor(() => [a!, b!].some((d) => d.daemon.status().channels[0]!.state === 'connected'), 10_000);
    const here = a!;
    const there = b!;
    const thereParts = there.daemon.status().cluster!.partitions.owned;
    const id = Array.from({ length: 100 }, (_, i) => 4000 + i).find((n) => thereParts.includes(partitionOf(`tg:${n}`, 8)))!;
    const user = { id, first_name: 'Remote' };
    tg!.dm(Array.from({ length: 60 }, (_, i) => `w${i}`).join(' '), user);
    tg!.dm('second question', user);
    const turns = await waitFor(() => {
      const list = there.daemon.status().turns.list;
      return list.some((t) => t.state === 'running') && list.some((t) => t.state === 'queued') ? list : undefined;
    }, 10_000);
    await waitFor(() => tg!.texts(id).length === 1, 10_000);
    const running = turns.find((t) => t.state === 'running')!;
    const queued = turns.find((t) => t.state === 'queued')!;
    // Neither turn is on the instance asked: it finds the one that runs them.
    expect(here.daemon.status().turns.list).toEqual([]);
    const stop = async (turn: string) => {
      const res = await fetch(`${here.url}/actions/stop-turn`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ id: turn }),
      });
      return { status: res.status, body: (await res.json()) as { result?: string } };
    };
    expect(await stop(queued.id)).toEqual({ status: 200, body: { id: queued.id, result: 'dropped' } });
    expect(await stop(running.id)).toEqual({ status: 200, body: { id: running.id, result: 'cancelled' } });
    await waitFor(() => tg!.texts(id)[0]!.endsWith(STOP_MARKER), 5000);
    await waitFor(() => there.daemon.status().turns.list.length === 0, 5000);
    // The dropped question was never answered; an id no instance runs is still a 404.
    expect(tg!.texts(id)).toHaveLength(1);
    expect((await stop(running.id)).status).toBe(404);
    expect(there.logs.text).toContain('stop-turn from another instance');
  });

  it('an instance that stops hands its listener and partitions over; nothing is lost', async () => {
    const [a, b] = await cluster(2, 5);
    await waitFor(() => [a!, b!].some((d) => d.daemon.status().channels[0]!.state === 'connected'), 10_000);
    const users = Array.from({ length: 6 }, (_, i) => ({ id: 3000 + i, first_name: `u${i}` }));
    for (const u of users) tg!.dm(`before ${u.id}`, u);
    await a!.stop();
    daemons = [b!];
    for (const u of users) tg!.dm(`after ${u.id}`, u);
    await waitFor(() => b!.daemon.status().cluster!.partitions.owned.length === 8, 15_000);
    await waitFor(() => b!.daemon.status().channels[0]!.state === 'connected', 15_000);
    await waitFor(() => users.every((u) => JSON.stringify(tg!.texts(u.id)) === JSON.stringify([`before ${u.id}`, `after ${u.id}`])), 20_000);
    expect(tg!.callsOf('sendMessage')).toHaveLength(12);
  });
});
