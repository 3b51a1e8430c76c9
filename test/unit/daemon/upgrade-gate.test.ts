import { describe, expect, it } from 'vitest';
import type { ChannelAdapter, Deliver } from '../../../src/contracts/channel.js';
import { ListenerGate } from '../../../src/daemon/upgrade/listeners.js';
import { Upgrades } from '../../../src/daemon/upgrade/service.js';
import { createLogger } from '../../../src/observe/logger.js';
import { MAX_STATE_BYTES, parseToNew, parseToOld } from '../../../src/daemon/upgrade/protocol.js';
import { successorCommand } from '../../../src/daemon/upgrade/command.js';
import { untilAborted } from '../../../src/util/abortable.js';
import { waitFor } from '../../helpers/daemon.js';

/** An adapter whose listener runs until its signal aborts, counting its runs; it hands over `state`. */
function listener(state: unknown) {
  const runs: AbortSignal[] = [];
  const resumed: unknown[] = [];
  const adapter = {
    id: 'x',
    selfId: undefined,
    capabilities: { maxMessageLength: 100, editsDrafts: false, minEditIntervalMs: 0, nativeStream: false, typing: false },
    listen: async (_d: Deliver, signal: AbortSignal) => {
      runs.push(signal);
      await untilAborted(signal).catch(() => {});
    },
    send: () => Promise.reject(new Error('unused')),
    edit: () => Promise.reject(new Error('unused')),
    delete: () => Promise.reject(new Error('unused')),
    typing: () => Promise.reject(new Error('unused')),
    handoverState: () => state,
    resumeFrom: (s: unknown) => void resumed.push(s),
  } satisfies ChannelAdapter;
  return { adapter, runs, resumed };
}

const deliver: Deliver = async () => true;

describe('ListenerGate (channeld upgrade)', () => {
  it('old process: pause stops the platform listener and hands over its state; resume runs it again; the supervisor saw one listen throughout', async () => {
    const { adapter, runs } = listener({ session: 's1' });
    const gate = new ListenerGate(adapter, 'handOver');
    const stop = new AbortController();
    let ended = false;
    const listening = gate.adapter.listen(deliver, stop.signal, () => {}).then(() => (ended = true));
    await waitFor(() => runs.length === 1);
    expect(await gate.pause()).toEqual({ session: 's1' });
    expect(runs[0]!.aborted).toBe(true);
    expect((runs[0]!.reason as { code?: string }).code).toBe('UPGRADE_HANDED_OVER');
    expect(ended).toBe(false);
    gate.resume();
    await waitFor(() => runs.length === 2);
    expect(runs[1]!.aborted).toBe(false);
    stop.abort();
    await listening;
    expect(ended).toBe(true);
  });

  it('new process: the first listen waits for the old one to let go and gives the adapter its state; other calls reach the adapter itself', async () => {
    const { adapter, runs, resumed } = listener(undefined);
    let release!: (s: unknown) => void;
    const gate = new ListenerGate(adapter, 'handOver', () => new Promise((r) => (release = r)));
    const stop = new AbortController();
    const listening = gate.adapter.listen(deliver, stop.signal, () => {});
    await waitFor(() => release !== undefined);
    expect(runs).toHaveLength(0);
    release({ session: 'handed' });
    await waitFor(() => runs.length === 1);
    expect(resumed).toEqual([{ session: 'handed' }]);
    expect(gate.adapter.id).toBe('x');
    await expect(gate.adapter.send({ channelId: 'x', chatId: 'c', chatType: 'dm' }, 't', { signal: stop.signal })).rejects.toThrow('unused');
    stop.abort();
    await listening;
  });

  it("the gate's adapter binds each method to the adapter once, and sees a replaced method", () => {
    class Counter {
      readonly id = 'x';
      #n = 0;
      next(): number {
        return ++this.#n;
      }
      listen(): Promise<void> {
        return Promise.resolve();
      }
    }
    const inner = new Counter();
    const gate = new ListenerGate(inner as unknown as ChannelAdapter, 'overlap');
    const adapter = gate.adapter as unknown as Counter;
    const next = adapter.next;
    expect(next()).toBe(1);
    expect(adapter.next).toBe(next);
    inner.next = () => 42;
    expect(adapter.next()).toBe(42);
  });

  it('a state over the bound is not handed over', async () => {
    const { adapter, runs } = listener({ big: 'x'.repeat(MAX_STATE_BYTES) });
    const gate = new ListenerGate(adapter, 'handOver');
    const stop = new AbortController();
    const listening = gate.adapter.listen(deliver, stop.signal, () => {});
    await waitFor(() => runs.length === 1);
    expect(await gate.pause()).toBeUndefined();
    stop.abort();
    await listening;
  });
});

describe('upgrade protocol and command', () => {
  it('takes only well-formed, bounded messages', () => {
    expect(parseToOld({ t: 'take', channel: 'tg' })).toEqual({ t: 'take', channel: 'tg' });
    expect(parseToOld({ t: 'take', channel: 'x'.repeat(201) })).toBeUndefined();
    expect(parseToOld({ t: 'failed', reason: 'r'.repeat(5000) })).toEqual({ t: 'failed', reason: 'r'.repeat(2000) });
    expect(parseToOld('ready')).toBeUndefined();
    expect(parseToNew({ t: 'frozen', busy: ['a:b'] })).toEqual({ t: 'frozen', busy: ['a:b'] });
    expect(parseToNew({ t: 'frozen', busy: [1] })).toBeUndefined();
    expect(parseToNew({ t: 'abort' })).toEqual({ t: 'abort' });
    expect(parseToNew({ t: 'taken', channel: 'tg', state: { big: 'x'.repeat(MAX_STATE_BYTES) } })).toEqual({ t: 'taken', channel: 'tg', state: undefined });
  });

  it('starts the same command line resolved anew, or --exec with the daemon arguments', () => {
    const proc = {
      execPath: '/usr/bin/node',
      execArgv: ['--expose-gc'],
      argv: ['/usr/bin/node', '/opt/channeld/dist/bundle/channeld.js', 'run', '--config', 'c.toml'],
    };
    expect(successorCommand(undefined, proc)).toEqual({
      file: '/usr/bin/node',
      args: ['--expose-gc', '/opt/channeld/dist/bundle/channeld.js', 'run', '--config', 'c.toml'],
    });
    expect(successorCommand('/srv/new/channeld.js', proc)).toEqual({
      file: '/usr/bin/node',
      args: ['--expose-gc', '/srv/new/channeld.js', 'run', '--config', 'c.toml'],
    });
    expect(successorCommand('/srv/new/start.sh', proc)).toEqual({ file: '/srv/new/start.sh', args: ['run', '--config', 'c.toml'] });
    expect(() => successorCommand('relative.sh', proc)).toThrow(/absolute path/);
  });
});

describe('Upgrades.wrap: how each listener moves', () => {
  const upgrades = (cluster: boolean) =>
    new Upgrades(
      {
        log: createLogger({ level: 'silent' }),
        timeoutMs: () => 1000,
        cluster,
        http: { listeningFd: () => undefined, stopAccepting: () => {}, drained: async () => {} },
        dispatcher: { freeze: () => [], deferTurns: () => {}, resumeTurns: () => 0, trackAdmissions: () => {}, recoverUnheld: () => 0 },
        storage: { flush: () => {}, status: () => ({ pending_writes: 0 }) },
        inbox: { unfinished: () => [] },
        reloading: () => false,
      },
      undefined,
    );
  /** A listener with a session to hand over that counts how often it was asked for it. */
  const counted = (name: string, extra: Partial<ChannelAdapter> = {}) => {
    const l = listener({ session: name });
    let asked = 0;
    const adapter: ChannelAdapter = { ...l.adapter, id: name, handoverState: () => (asked++, { session: name }), ...extra };
    return { adapter, resumed: l.resumed, asked: () => asked };
  };

  it('cluster mode: an exclusive listener moves by its lease only (its state is never read nor restored); one every instance runs overlaps and is restored', () => {
    const u = upgrades(true);
    const gateway = counted('gw');
    const socket = counted('sock', { upgradeOverlap: true });
    const page = counted('page');
    for (const [c, exclusive] of [
      [gateway, true],
      [socket, true],
      [page, false],
    ] as const)
      u.wrap(c.adapter.id, c.adapter, exclusive);
    const gate = (id: string) => u.predecessor.gates.get(id)!;
    expect([gate('gw').move, gate('sock').move, gate('page').move]).toEqual(['leased', 'leased', 'overlap']);
    for (const id of ['gw', 'sock']) {
      expect(gate(id).overlapState()).toBeUndefined();
      gate(id).restore({ session: 'from the old process' });
    }
    expect([gateway.asked(), socket.asked(), gateway.resumed, socket.resumed]).toEqual([0, 0, [], []]);
    expect(gate('page').overlapState()).toEqual({ session: 'page' });
    gate('page').restore({ session: 'from the old process' });
    expect(page.resumed).toEqual([{ session: 'from the old process' }]);
  });

  it('one node: an exclusive listener is handed over unless it may overlap', () => {
    const u = upgrades(false);
    for (const [id, exclusive, extra] of [
      ['gw', true, {}],
      ['sock', true, { upgradeOverlap: true }],
      ['page', false, {}],
    ] as const)
      u.wrap(id, counted(id, extra).adapter, exclusive);
    expect(['gw', 'sock', 'page'].map((id) => u.predecessor.gates.get(id)!.move)).toEqual(['handOver', 'overlap', 'overlap']);
  });
});
