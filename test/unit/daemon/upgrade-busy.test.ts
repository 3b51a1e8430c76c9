import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { Predecessor } from '../../../src/daemon/upgrade/predecessor.js';
import { frozenMessages, MAX_BUSY_PARTS, MAX_BUSY_SCOPES, MAX_SCOPE_CHARS, parseToNew } from '../../../src/daemon/upgrade/protocol.js';
import { createLogger } from '../../../src/observe/logger.js';
import { waitFor } from '../../helpers/daemon.js';
import { gone, linkedSuccessor, READY, standInChild } from '../../helpers/upgrade.js';

/** A new process's link over an in-memory channel: `fromOld` gives it what the old one sent. */
function linked() {
  const { successor, fromOld, gone } = linkedSuccessor();
  let busy: string[] | undefined;
  void successor.frozen.then((b) => (busy = b));
  return {
    fromOld,
    gone,
    // The promise's callback runs on a later microtask; a macrotask is past it.
    frozen: async () => (await new Promise((r) => setImmediate(r)), busy),
  };
}

describe('upgrade: the busy list at the freeze', () => {
  const cleanup: Array<() => void> = [];
  afterEach(() => {
    for (const c of cleanup.splice(0).reverse()) c();
  });

  // A busy list over MAX_BUSY_SCOPES (a freeze whose commit failed lists every conversation
  // with an unfinished item) went in one `frozen` the new process's parser rejected whole:
  // it started no turn in any conversation until the old process had exited, then ran them all.
  it('a list over the bound reaches the new process whole, in bounded messages over the real channel', async () => {
    const child = standInChild('channeld-upgrade-busy-', { 'ready.cjs': READY });
    cleanup.push(child.cleanup);
    const { childPid, pidFile, fd } = child;
    const busy = Array.from({ length: 2 * MAX_BUSY_SCOPES + 7 }, (_, i) => `tg:${i}`);
    const predecessor = new Predecessor({
      log: createLogger({ level: 'silent' }),
      timeoutMs: () => 60_000,
      http: { listeningFd: () => fd, stopAccepting: () => {}, drained: async () => {} },
      freeze: () => busy,
      watchStored: () => () => 0,
      notify: async () => {},
    });

    expect(await predecessor.upgrade({ exec: child.script('ready.cjs') })).toMatchObject({ ok: true });
    // Everything it sent before it let go: `done` is the last message.
    await predecessor.finish();
    const got = await waitFor(() => {
      try {
        const lines = readFileSync(`${pidFile}.got`, 'utf8').split('\n').filter(Boolean);
        return lines.at(-1) === '{"t":"done"}' ? lines.map((l) => JSON.parse(l) as unknown) : undefined;
      } catch {
        return undefined;
      }
    });
    const parsed = got.map(parseToNew);
    expect(parsed.every((m) => m !== undefined)).toBe(true);
    // Each within the bound; what came before `done` told the new process every busy scope.
    expect(parsed.every((m) => m?.t !== 'busy' || m.scopes.length <= MAX_BUSY_SCOPES)).toBe(true);
    const link = linked();
    for (const m of got.slice(0, -1)) link.fromOld(m);
    expect(await link.frozen()).toEqual(busy);
    await waitFor(() => gone(childPid()));
  });

  it('takes each part and the final `frozen` strictly; a part missing holds everything until the old process is gone', async () => {
    const part = (from: number, count: number) => Array.from({ length: count }, (_, i) => `s:${from + i}`);
    expect(parseToNew({ t: 'busy', scopes: part(0, MAX_BUSY_SCOPES) })).toEqual({ t: 'busy', scopes: part(0, MAX_BUSY_SCOPES) });
    expect(parseToNew({ t: 'busy', scopes: part(0, MAX_BUSY_SCOPES + 1) })).toBeUndefined();
    expect(parseToNew({ t: 'busy', scopes: ['x'.repeat(1001)] })).toBeUndefined();
    expect(parseToNew({ t: 'frozen', busy: part(0, MAX_BUSY_SCOPES + 1) })).toBeUndefined();
    expect(parseToNew({ t: 'frozen', parts: 2 })).toEqual({ t: 'frozen', parts: 2 });
    for (const parts of [0, -1, 1.5, '2', Number.POSITIVE_INFINITY]) expect(parseToNew({ t: 'frozen', parts })).toBeUndefined();
    // Both: an older new process would take `busy` and miss the parts.
    expect(parseToNew({ t: 'frozen', busy: [], parts: 1 })).toBeUndefined();

    const whole = linked();
    whole.fromOld({ t: 'busy', scopes: part(0, 3) });
    whole.fromOld({ t: 'busy', scopes: part(3, 2) });
    whole.fromOld({ t: 'frozen', parts: 2 });
    expect(await whole.frozen()).toEqual(part(0, 5));

    // A part the parser dropped (a scope over the bound): those conversations' turns may still
    // run in the old process, so none is taken as idle until it has gone (and with it its turns).
    const short = linked();
    short.fromOld({ t: 'busy', scopes: part(0, 3) });
    short.fromOld({ t: 'busy', scopes: ['x'.repeat(1001)] });
    short.fromOld({ t: 'frozen', parts: 2 });
    expect(await short.frozen()).toBeUndefined();
    short.gone();
    expect(await short.frozen()).toEqual([]);
  });

  it('the old process sends nothing the new one would refuse: past MAX_BUSY_PARTS parts, or a scope over MAX_SCOPE_CHARS', () => {
    expect(frozenMessages(['a', 'b'])).toEqual([{ t: 'frozen', busy: ['a', 'b'] }]);
    expect(frozenMessages(['a', 'x'.repeat(MAX_SCOPE_CHARS + 1)])).toBeUndefined();
    const most = Array.from({ length: MAX_BUSY_PARTS * MAX_BUSY_SCOPES }, (_, i) => `s:${i}`);
    const sent = frozenMessages(most)!;
    expect(sent).toHaveLength(MAX_BUSY_PARTS + 1);
    expect(sent.every((m) => parseToNew(m) !== undefined)).toBe(true);
    most.push('one more');
    expect(frozenMessages(most)).toBeUndefined();
  });
});
