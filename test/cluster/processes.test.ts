import { afterEach, describe, expect, it } from 'vitest';
import { partitionOf } from '../../src/cluster/partition-key.js';
import { visibleText, type StoredMessage } from '../fakes/telegram/server.js';
import { waitFor } from '../helpers/daemon.js';
import { scaled } from '../helpers/timing.js';
import { clusterSkipReason } from '../helpers/cluster.js';
import { Load, ProcessCluster, type Member } from './harness.js';

const skip = await clusterSkipReason();
/**
 * Conversations x messages each: the issue's full 1,000 messages over 100 conversations.
 * Under two CPU burners with CI=true it took 41-106 s (40 s for 40 x 6), so CI's three
 * suite runs pay about a minute more for the full size (docs/CLUSTER.md, "Acceptance run").
 * CHANNELD_CLUSTER_LOAD=40x6 runs a smaller load with the same assertions.
 */
const [CONVERSATIONS, PER_CONVERSATION] = (process.env.CHANNELD_CLUSTER_LOAD ?? '100x10').split('x').map(Number) as [number, number];
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(skip !== undefined)(`cluster mode, three real processes${skip ? ` (skipped: ${skip})` : ''}`, () => {
  let c: ProcessCluster | undefined;
  afterEach(async () => {
    await c?.close();
    c = undefined;
  });

  it(`${CONVERSATIONS * PER_CONVERSATION} messages over ${CONVERSATIONS} conversations, 2 s answers; kill -9 of the Telegram listener's owner, then of the busiest instance: each answered once, in order, drafts continued`, async () => {
    c = new ProcessCluster({ echoDelayMs: 400 }); // five words: a 2 s streamed answer
    await c.start(3);
    const load = new Load(c, CONVERSATIONS, PER_CONVERSATION);
    // With CHANNELD_CLUSTER_LOGS (a study of a slow run), progress every 5 s beside the kept logs.
    const startedAt = Date.now();
    const progress = process.env.CHANNELD_CLUSTER_LOGS ? setInterval(() => console.log(`t=${Date.now() - startedAt} ms ${load.progress()}`), 5000) : undefined;
    const killAtRound = [Math.floor(PER_CONVERSATION * 0.3), Math.floor(PER_CONVERSATION * 0.6)];
    let tgKilledAt = 0;
    const killedAt: number[] = [];
    const respawns: Promise<unknown>[] = [];
    let drafts: Array<{ msg: StoredMessage; before: string }> = [];
    const kill = async (m: Member) => {
      killedAt.push(Date.now());
      m.proc.child.kill('SIGKILL');
      await m.proc.exited;
      // It comes back soon, within its old leases' TTL, as a fresh process under the same
      // instance id (as a supervisor restarts it), and must be let in.
      respawns.push(pause(2000).then(() => c!.spawn(m.id)));
    };
    for (let k = 0; k < PER_CONVERSATION; k++) {
      await load.round(k);
      await pause(1000);
      if (k === killAtRound[0]) {
        const owner = (await c.ownerOf('listener.tg'))!;
        expect(owner).toBeDefined();
        tgKilledAt = Date.now();
        await kill(owner);
      }
      if (k === killAtRound[1]) {
        const live = c.live();
        // Kill the busiest instance while it is writing drafts (Telegram conversations it
        // owns), so there is a running turn to be continued elsewhere. Only drafts edited at
        // least once count: their message id was stored an edit interval ago. A draft the
        // platform accepted in the last moment before the kill may not be stored yet (the
        // docs/PERFORMANCE.md's window) and is then answered anew, not continued.
        let i = 0;
        await waitFor(
          async () => {
            const statuses = await Promise.all(live.map((m) => c!.status(m)));
            i = statuses.reduce((best, s, j) => (s.turns.in_flight > statuses[best]!.turns.in_flight ? j : best), 0);
            const owned = new Set(statuses[i]!.cluster.partitions.owned);
            const finals = new Set([...load.sent.values()].flat());
            drafts = c!.tg.messages
              .filter((m) => !m.deleted && m.edits >= 1 && owned.has(partitionOf(`tg:${m.chatId}`, 16)) && !finals.has(visibleText(m.text, m.parseMode)))
              .map((msg) => ({ msg, before: msg.text }));
            return drafts.length > 0;
          },
          30_000,
          20,
        );
        await kill(live[i]!);
      }
    }
    await waitFor(() => load.complete(), 240_000, 250)
      .finally(() => clearInterval(progress))
      .catch(() => {
        throw new Error(`not every message was answered in order:\n${load.problems().slice(0, 10).join('\n')}`);
      });
    // Both killed instances came back and share the work again.
    await Promise.all(respawns);
    await c.settled(3);
    // docs/PERFORMANCE.md's window: a draft the platform accepted just before the kill, whose id had
    // not reached the store yet, is left behind and the answer starts again. Any other
    // unfinished message (written well after a kill) would be a duplicate answer.
    const orphans = load.unfinished();
    for (const o of orphans)
      expect(
        killedAt.some((t) => o.lastWriteAt >= t - 5000 && o.lastWriteAt <= t + 2000),
        `${o.key}: "${o.text}" last written at ${o.lastWriteAt}, kills at ${killedAt.join(', ')}`,
      ).toBe(true);
    // Exactly once otherwise: one platform message per user message.
    expect(load.created()).toBe(CONVERSATIONS * PER_CONVERSATION + orphans.length);
    // Telegram was polled again within 10 s of its listener's owner dying (the bound follows
    // the tests' time scale: under CI's CPU burner lease renewals and polls run late too).
    const repoll = c.tg.callsOf('getUpdates').find((call) => call.at > tgKilledAt);
    expect(repoll!.at - tgKilledAt).toBeLessThanOrEqual(scaled(10_000));
    // The turns running on the killed instance were finished by another, in the same message.
    const finals = new Set([...load.sent.values()].flat());
    const continued = drafts.filter((d) => !d.msg.deleted && finals.has(visibleText(d.msg.text, d.msg.parseMode)));
    expect(continued.length).toBeGreaterThan(0);
    expect(drafts.length - continued.length).toBeLessThanOrEqual(orphans.length);
  }, 480_000);

  it('a rolling restart (SIGTERM each instance in turn) loses nothing and answers nothing twice', async () => {
    c = new ProcessCluster({ echoDelayMs: 200 });
    await c.start(3);
    const load = new Load(c, 12, 5);
    for (let k = 0; k < 5; k++) {
      await load.round(k);
      if (k >= 1 && k <= 3) {
        const m = c.members[k - 1]!;
        m.proc.signal('SIGTERM');
        expect(await m.proc.exited).toBe(0);
        await c.spawn(m.id);
      }
      await pause(500);
    }
    await waitFor(() => load.complete(), 180_000, 250).catch(() => {
      throw new Error(`not every message was answered in order:\n${load.problems().slice(0, 10).join('\n')}`);
    });
    expect(load.unfinished()).toEqual([]);
    expect(load.created()).toBe(12 * 5);
  }, 360_000);
});
