import pino, { type Logger } from 'pino';
import { afterEach, beforeEach, expect } from 'vitest';
import { MatrixAdapter, type MatrixOptions } from '../../channels/matrix/adapter.js';
import { SyncStateFile, type SyncState } from '../../channels/matrix/sync-state.js';
import type { ChannelMessage } from '../../src/contracts/message.js';
import { FakeMatrix } from '../fakes/matrix/server.js';
import { waitFor } from './daemon.js';
import { withStarted, withTempDir } from './fixtures.js';

/** The fake Matrix homeserver, listening, closed when the test finishes (start it before the daemon). */
export const withMatrix = (): Promise<FakeMatrix> => withStarted(new FakeMatrix());

/** Channel "mx" on the fake: the group room allowlisted, everyone allowed; secret MX_TOKEN. */
export const matrixChannel = (mx: FakeMatrix, extra = ''): string =>
  `[[channels]]\nid = "mx"\ntype = "matrix"\nhomeserver_url = "${mx.url}"\nuser_id = "${mx.userId}"\naccess_token_env = "MX_TOKEN"\nrooms = ["${mx.groupRoom}"]\nallow_from = ["*"]\n${extra}`;

/** The environment `matrixChannel` reads its token from (`token` to present another one). */
export const matrixEnv = (mx: FakeMatrix, token = mx.token): NodeJS.ProcessEnv => ({ MX_TOKEN: token });

export const MINUTE_MS = 60_000;
export const HOUR_MS = 60 * MINUTE_MS;
export const DAY_MS = 24 * HOUR_MS;
/** The cluster's shared inbox: 90 s, so a catch-up reaches 75 s back (15 s for the clocks). */
export const CLUSTER_WINDOW_MS = 90_000;
/** A room the bot is invited to in the join tests. */
export const NEW_ROOM = '!new:fake.test';

// What the adapter logs, as the tests look for it.
export const GAP_WARNING = 'Matrix did not read every message a limited /sync left out in a room; the older ones are not answered';
export const RESUME_WARNING =
  "Matrix resumed /sync from a position stored longer ago than the inbox's duplicate window (or a day): the messages of its first batch older than that were skipped, as they may have been answered already";
export const RETRYING = 'Matrix room could not be joined; trying again';
export const REFUSED = 'Matrix room could not be joined: the homeserver refused it; not tried again';
export const GAVE_UP = 'Matrix room could not be joined; giving up (invite the bot again to retry)';
export const ACCEPTED = 'Matrix invite accepted';

/** One line of the adapter's log, with the fields the tests read. */
export interface MatrixLine {
  level: number;
  msg: string;
  room?: string;
  bound?: string;
  read?: number;
  notReadAtLeast?: number;
  events?: number;
  skipped?: number;
  reachMs?: number;
  positionAgeMs?: number;
  attempt?: number;
  attempts?: number;
  retryInMs?: number;
  err?: string;
  error?: { code: string; message: string };
  timelineLimit?: number;
  nextTimelineLimit?: number;
}

/** An event as the fake homeserver stored it. */
type MatrixEvent = ReturnType<FakeMatrix['post']>;

/** `prefix1`…: the bodies `burst` posts, `from` to `to`. */
export const numbered = (prefix: string, from: number, to: number): string[] => Array.from({ length: to - from + 1 }, (_, i) => `${prefix}${from + i}`);

/** A listener the fixture started. */
export interface MatrixRun {
  /** What its listen failed with; undefined while it runs and when it ended by its signal. */
  failure: unknown;
  /** Its listen has settled. */
  done: boolean;
  /** It said it connected. */
  connected: boolean;
  /** Settles (never rejects) once its listen has. */
  ended: Promise<void>;
  /** Aborts this listener alone and waits for its end. */
  stop(): Promise<void>;
}

/**
 * Each test's fake homeserver, state dir and log for the adapter tests of one `describe`.
 * `mx` and `dir` are new for every test (read them as `f.mx`); the arrays and the functions stay
 * the same object, so a describe may take them out once. Every listener started here stops when
 * `stop` aborts, which it does after each test, and is waited for.
 */
export function matrixFixture(prefix: string) {
  let runs: MatrixRun[] = [];
  const f = {
    mx: undefined as unknown as FakeMatrix,
    dir: '',
    /** Aborted after each test (a test may abort it sooner): it ends every listener started here. */
    stop: new AbortController(),
    lines: [] as MatrixLine[],
    delivered: [] as ChannelMessage[],
    /** Takes every message at once, into `delivered`. */
    deliver: async (m: ChannelMessage): Promise<boolean> => {
      f.delivered.push(m);
      return true;
    },
    /** A logger whose lines are parsed into `lines`. */
    log: (): Logger => pino({ level: 'info' }, { write: (s: string) => void f.lines.push(JSON.parse(s)) }),
    logged: (msg: string): MatrixLine[] => f.lines.filter((l) => l.msg === msg),
    texts: (): string[] => f.delivered.map((m) => m.text),
    /** The adapter of channel "mx" on the fake: the group room served, auto_join off, everyone allowed; `o` changes any of it. */
    adapter: (o: Partial<MatrixOptions> = {}): MatrixAdapter =>
      new MatrixAdapter(
        {
          id: 'mx',
          homeserverUrl: f.mx.url,
          userId: f.mx.userId,
          rooms: [f.mx.groupRoom],
          autoJoin: false,
          allowFrom: ['*'],
          stateDir: f.dir,
          log: f.log(),
          syncTimeoutMs: 5000,
          ...o,
        },
        f.mx.token,
      ),
    /** auto_join on, invites from alice accepted; `joinRetryMs` a failed join's first wait. */
    autoJoinAdapter: (joinRetryMs: number, rooms?: string[]): MatrixAdapter =>
      f.adapter({ rooms: rooms ?? [f.mx.groupRoom], autoJoin: true, allowFrom: [f.mx.alice], joinRetryMs }),
    /** `a` listening into `deliver` until `stop` (or its own `stop()`); its failure is kept for the test to see. */
    listen: (a?: MatrixAdapter): MatrixRun => {
      const own = new AbortController();
      // Filled in before listen starts: it may say it connected before its first await.
      const state = { failure: undefined as unknown, done: false, connected: false };
      const ended = (a ?? f.adapter())
        .listen(f.deliver, AbortSignal.any([f.stop.signal, own.signal]), () => {
          state.connected = true;
        })
        .catch((err: unknown) => {
          state.failure = err;
        })
        .finally(() => {
          state.done = true;
        });
      const run: MatrixRun = Object.assign(state, {
        ended,
        stop: async () => {
          own.abort();
          await ended;
        },
      });
      runs.push(run);
      return run;
    },
    /** `listen`, returned once connected and past its first /sync (a fresh start's history one too), without failing. */
    listenSynced: async (a: MatrixAdapter): Promise<MatrixRun> => {
      const fresh = !f.stored();
      const syncsBefore = f.mx.callsOf('sync').length;
      const run = f.listen(a);
      await waitFor(() => run.failure ?? (run.connected && f.mx.callsOf('sync').length > syncsBefore + (fresh ? 1 : 0)), 10_000);
      expect(run.failure).toBeUndefined();
      return run;
    },
    stored: (): SyncState | undefined => new SyncStateFile(f.dir, 'mx').read(f.mx.userId),
    /** Every event so far is handed over and the position stored past it. */
    storedToEnd: (): Promise<unknown> => waitFor(() => f.stored()?.since === `s${f.mx.position}`, 10_000),
    /** The state a run that stopped at `since` left (`more`: the joins it owed, when it stored it). */
    store: (since: string, more: Pick<SyncState, 'pendingJoins' | 'savedAtMs'> = {}): void =>
      new SyncStateFile(f.dir, 'mx').write({ userId: f.mx.userId, since, encryptedNotified: [], ...more }),
    /** The bot was away since the fake began: its position is before everything the fake holds, stored at `savedAtMs` (none: a file from before the time was kept). */
    awayFromStart: (savedAtMs?: number): void => f.store('s0', savedAtMs === undefined ? {} : { savedAtMs }),
    /** A message from alice in `room`, sent `agoMs` ago by her server's clock (a late federated one when posted after newer ones). */
    sent: (room: string, body: string, agoMs = 0): MatrixEvent =>
      f.mx.post(room, { msgtype: 'm.text', body }, f.mx.alice, 'm.room.message', Date.now() - agoMs),
    /** A message to the bot in the direct chat, sent `agoMs` ago. */
    dmSent: (body: string, agoMs: number): MatrixEvent => f.sent(f.mx.dmRoom, body, agoMs),
    /** A message in the group room, sent `agoMs` ago. */
    groupSent: (body: string, agoMs: number): MatrixEvent => f.sent(f.mx.groupRoom, body, agoMs),
    /** `n` numbered messages in `room`, `${prefix}1`…, each sent `agoMs` ago. */
    burst: (room: string, n: number, prefix = 'm', agoMs = 0): void => {
      for (let i = 1; i <= n; i++) f.sent(room, `${prefix}${i}`, agoMs);
    },
  };
  beforeEach(async () => {
    f.mx = await withMatrix();
    f.dir = withTempDir(prefix);
    f.stop = new AbortController();
    f.lines.length = 0;
    f.delivered.length = 0;
    runs = [];
  });
  afterEach(async () => {
    f.stop.abort();
    await Promise.all(runs.map((r) => r.ended));
  });
  return f;
}
