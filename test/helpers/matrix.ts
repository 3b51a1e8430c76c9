import pino from 'pino';
import { MatrixAdapter } from '../../channels/matrix/adapter.js';
import type { ChannelMessage } from '../../src/contracts/message.js';
import { FakeMatrix } from '../fakes/matrix/server.js';
import { withStarted } from './fixtures.js';

/** The fake Matrix homeserver, listening, closed when the test finishes (start it before the daemon). */
export const withMatrix = (): Promise<FakeMatrix> => withStarted(new FakeMatrix());

/** Channel "mx" on the fake: the group room allowlisted, everyone allowed; secret MX_TOKEN. */
export const matrixChannel = (mx: FakeMatrix, extra = ''): string =>
  `[[channels]]\nid = "mx"\ntype = "matrix"\nhomeserver_url = "${mx.url}"\nuser_id = "${mx.userId}"\naccess_token_env = "MX_TOKEN"\nrooms = ["${mx.groupRoom}"]\nallow_from = ["*"]\n${extra}`;

/** The environment `matrixChannel` reads its token from (`token` to present another one). */
export const matrixEnv = (mx: FakeMatrix, token = mx.token): NodeJS.ProcessEnv => ({ MX_TOKEN: token });

/**
 * The Matrix adapter the channel tests listen with: auto_join on, invites from alice accepted,
 * its log lines parsed into `lines`; `rooms` the allowlist, `joinRetryMs` a failed join's first wait.
 */
export function autoJoinAdapter(mx: FakeMatrix, o: { stateDir: string; lines: unknown[]; rooms: string[]; joinRetryMs: number }): MatrixAdapter {
  return new MatrixAdapter(
    {
      id: 'mx',
      homeserverUrl: mx.url,
      userId: mx.userId,
      rooms: o.rooms,
      autoJoin: true,
      allowFrom: [mx.alice],
      stateDir: o.stateDir,
      log: pino({ level: 'info' }, { write: (s: string) => void o.lines.push(JSON.parse(s)) }),
      syncTimeoutMs: 5000,
      joinRetryMs: o.joinRetryMs,
    },
    mx.token,
  );
}

/**
 * `adapter` listening until `signal`: what it delivers goes to `delivered` (stored at once),
 * the error its listen ends with to `onFailure`. `connected()` once it said so, `ended()` once
 * its listen settled (`done`).
 */
export function listenInto(adapter: MatrixAdapter, delivered: ChannelMessage[], signal: AbortSignal, onFailure: (err: unknown) => void) {
  let connected = false;
  let ended = false;
  const done = adapter
    .listen(
      async (m) => {
        delivered.push(m);
        return true;
      },
      signal,
      () => {
        connected = true;
      },
    )
    .catch(onFailure)
    .finally(() => {
      ended = true;
    });
  return { connected: () => connected, ended: () => ended, done };
}
