import { describe, expect, it } from 'vitest';
import { DirectChats } from '../../../channels/matrix/direct.js';
import { waitFor } from '../../helpers/daemon.js';
import { type MatrixRun, matrixFixture, NEW_ROOM } from '../../helpers/matrix.js';

type Content = Record<string, string[]>;

/** Lets every callback already queued run (promise jobs, I/O): what a write overtaking another would need to start. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * An account's m.direct as a homeserver keeps it: reads serve the last write. `gate`, when set,
 * holds the next write until it is resolved; `failNext` makes the next write (or read) fail.
 */
function account(initial: Content) {
  const a = {
    content: structuredClone(initial) as Content,
    writes: [] as Content[],
    events: [] as string[],
    readFailures: [] as string[],
    gate: undefined as Promise<void> | undefined,
    failNextWrite: false,
    failNextRead: false,
    /** Reads served from a copy that missed the writes (a lagging replica): this content, not the last write. */
    staleRead: undefined as Content | undefined,
  };
  const direct = new DirectChats(
    async (content) => {
      const room = Object.values(content as Content)
        .flat()
        .at(-1);
      a.events.push(`write ${room}`);
      const gate = a.gate;
      a.gate = undefined;
      if (gate) await gate;
      if (a.failNextWrite) {
        a.failNextWrite = false;
        a.events.push(`failed ${room}`);
        throw new Error('502 from the homeserver');
      }
      a.writes.push(structuredClone(content) as Content);
      a.content = structuredClone(content) as Content;
      a.events.push(`wrote ${room}`);
    },
    {
      read: async () => {
        a.events.push('read');
        if (a.failNextRead) {
          a.failNextRead = false;
          throw new Error('502 from the homeserver');
        }
        return structuredClone(a.staleRead ?? a.content);
      },
      readFailed: (roomId) => void a.readFailures.push(roomId),
    },
  );
  direct.set(structuredClone(initial));
  return { a, direct };
}

const sorted = (rooms: string[] | undefined) => [...(rooms ?? [])].sort();

describe('Matrix DirectChats: m.direct written from the server copy', () => {
  const signal = new AbortController().signal;

  // A /sync answer built after one write and handled after the next hands over content that
  // lacks the later room: a write built on it dropped that room from the account for good.
  it('a stale m.direct from /sync neither drops a room written here from has() nor from the next write', async () => {
    const { a, direct } = account({ '@a': ['!dm'] });
    await direct.add('@a', '!b', signal);
    direct.set({ '@a': ['!dm'] });
    await direct.add('@a', '!c', signal);
    expect(sorted(a.writes.at(-1)?.['@a'])).toEqual(['!b', '!c', '!dm']);
    expect(sorted(a.content['@a'])).toEqual(['!b', '!c', '!dm']);
    expect(direct.has('!b')).toBe(true);
    expect(direct.has('!c')).toBe(true);
    expect(direct.has('!dm')).toBe(true);
  });

  it("another client's change on the server is kept by the next write", async () => {
    const { a, direct } = account({ '@a': ['!dm'] });
    a.content = { '@a': ['!dm'], '@z': ['!z'] };
    await direct.add('@a', '!b', signal);
    expect(a.writes.at(-1)).toEqual({ '@a': ['!dm', '!b'], '@z': ['!z'] });
    expect(direct.has('!z')).toBe(true);
  });

  it('a room /sync has shown once is then the server copy alone: taken out, it is no longer a direct chat', async () => {
    const { direct } = account({ '@a': ['!dm'] });
    await direct.add('@a', '!b', signal);
    direct.set({ '@a': ['!dm', '!b'] });
    direct.set({ '@a': ['!dm'] });
    expect(direct.has('!b')).toBe(false);
  });

  it('a read served from a copy behind the writes still keeps the rooms written here', async () => {
    const { a, direct } = account({ '@a': ['!dm'] });
    a.staleRead = { '@a': ['!dm'] };
    await direct.add('@a', '!b', signal);
    await direct.add('@a', '!c', signal);
    expect(sorted(a.writes.at(-1)?.['@a'])).toEqual(['!b', '!c', '!dm']);
  });

  it('a read that fails: the write goes on from the content known here (rooms written here included), and says so', async () => {
    const { a, direct } = account({ '@a': ['!dm'] });
    await direct.add('@a', '!b', signal);
    direct.set({ '@a': ['!dm'] });
    a.failNextRead = true;
    await direct.add('@a', '!c', signal);
    expect(a.readFailures).toEqual(['!c']);
    expect(sorted(a.writes.at(-1)?.['@a'])).toEqual(['!b', '!c', '!dm']);
    expect(direct.has('!c')).toBe(true);
  });

  it('a room a /sync shows while it is being written is then the server copy alone', async () => {
    const { a, direct } = account({ '@a': ['!dm'] });
    const release = deferred();
    a.gate = release.promise;
    const adding = direct.add('@a', '!b', signal);
    await waitFor(() => a.events.includes('write !b'));
    direct.set({ '@a': ['!dm', '!b'] });
    release.resolve();
    await adding;
    expect(direct.has('!b')).toBe(true);
    direct.set({ '@a': ['!dm'] });
    expect(direct.has('!b')).toBe(false);
  });

  it('a room the server copy already lists is not written again', async () => {
    const { a, direct } = account({ '@a': ['!dm'] });
    a.content = { '@a': ['!dm', '!b'] };
    await direct.add('@a', '!b', signal);
    expect(a.writes).toEqual([]);
    expect(direct.has('!b')).toBe(true);
  });
});

describe('Matrix DirectChats: the writes go one at a time', () => {
  const signal = new AbortController().signal;

  it('a waiter that gives up does not let a later write overtake the one in flight', async () => {
    const { a, direct } = account({ '@a': ['!dm'] });
    const release = deferred();
    a.gate = release.promise;
    const first = direct.add('@a', '!a', signal);
    await waitFor(() => a.events.includes('write !a'));
    const quit = new AbortController();
    const second = direct.add('@a', '!b', quit.signal);
    quit.abort();
    await expect(second).rejects.toThrow();
    const third = direct.add('@a', '!c', signal);
    await settle();
    // Nothing of the third began while the first was in flight.
    const writes = () => a.events.filter((e) => e !== 'read');
    expect(writes()).toEqual(['write !a']);
    release.resolve();
    await Promise.all([first, third]);
    expect(writes()).toEqual(['write !a', 'wrote !a', 'write !c', 'wrote !c']);
    expect(sorted(a.content['@a'])).toEqual(['!a', '!c', '!dm']);
    expect(direct.has('!b')).toBe(false);
  });

  it('a write that fails lets the next one run, from the content before it', async () => {
    const { a, direct } = account({ '@a': ['!dm'] });
    const release = deferred();
    a.gate = release.promise;
    a.failNextWrite = true;
    const first = direct.add('@a', '!a', signal);
    const second = direct.add('@a', '!b', signal);
    release.resolve();
    await expect(first).rejects.toThrow('502');
    await second;
    expect(a.writes).toEqual([{ '@a': ['!dm', '!b'] }]);
    expect(direct.has('!a')).toBe(false);
    expect(direct.has('!b')).toBe(true);
  });

  it('has() is asked again after the wait: a room recorded meanwhile is not written again', async () => {
    const { a, direct } = account({ '@a': ['!dm'] });
    // Another client listed !x, which this process learns while its first write is in flight.
    a.content = { '@a': ['!dm', '!x'] };
    const release = deferred();
    a.gate = release.promise;
    const first = direct.add('@a', '!a', signal);
    const again = direct.add('@a', '!a', signal);
    const third = direct.add('@a', '!x', signal);
    await waitFor(() => a.events.includes('write !a'));
    expect(direct.has('!a')).toBe(false);
    expect(direct.has('!x')).toBe(false);
    direct.set({ '@a': ['!dm', '!x'] });
    release.resolve();
    await Promise.all([first, again, third]);
    expect(a.writes).toEqual([{ '@a': ['!dm', '!x', '!a'] }]);
    expect(a.events.filter((e) => e === 'read')).toHaveLength(1);
    expect(direct.has('!a') && direct.has('!x')).toBe(true);
  });
});

// The adapter's side: the read before each write (an account without m.direct reads as empty),
// and a read that fails still records the room, with a warning.
describe('Matrix: recording a direct chat reads m.direct first', () => {
  const f = matrixFixture('matrix-direct');
  const { delivered, lines } = f;
  let run: MatrixRun;
  const listen = async () => {
    run = await f.listenSynced(f.autoJoinAdapter(20, []));
  };

  it('an account that has no m.direct yet gets one holding the room', async () => {
    f.mx.forgetAccountData('m.direct');
    await listen();
    f.mx.invite(NEW_ROOM, f.mx.alice, true);
    await waitFor(() => f.mx.accountData('m.direct'), 10_000);
    expect(f.mx.accountData('m.direct')).toEqual({ [f.mx.alice]: [NEW_ROOM] });
    // The start's read and the one before the write, each answered 404 M_NOT_FOUND: empty, not a failure.
    expect(f.mx.callsOf('account_data').map((c) => (c.body === undefined ? 'GET' : 'PUT'))).toEqual(['GET', 'GET', 'PUT']);
    expect(lines.filter((l) => l.msg.startsWith('Matrix m.direct could not be read'))).toEqual([]);
    f.mx.post(NEW_ROOM, { msgtype: 'm.text', body: 'first words' });
    await waitFor(() => run.failure ?? delivered.some((m) => m.text === 'first words' && m.chat.type === 'dm'), 10_000);
    expect(run.failure).toBeUndefined();
  });

  it('a read that fails: the room is recorded from the copy known here, and a warning names it', async () => {
    await listen();
    f.mx.fail('account_data', { status: 502 });
    f.mx.invite(NEW_ROOM, f.mx.alice, true);
    await waitFor(() => (f.mx.accountData('m.direct') as Content)[f.mx.alice]?.includes(NEW_ROOM), 10_000);
    expect(f.mx.accountData('m.direct')).toEqual({ [f.mx.alice]: [f.mx.dmRoom, NEW_ROOM] });
    expect(lines.filter((l) => l.msg.startsWith('Matrix m.direct could not be read'))).toMatchObject([{ level: 40, room: NEW_ROOM }]);
  });
});
