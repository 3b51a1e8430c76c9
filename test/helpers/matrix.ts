import { FakeMatrix } from '../fakes/matrix/server.js';
import { withStarted } from './fixtures.js';

/** The fake Matrix homeserver, listening, closed when the test finishes (start it before the daemon). */
export const withMatrix = (): Promise<FakeMatrix> => withStarted(new FakeMatrix());

/** Channel "mx" on the fake: the group room allowlisted, everyone allowed; secret MX_TOKEN. */
export const matrixChannel = (mx: FakeMatrix, extra = ''): string =>
  `[[channels]]\nid = "mx"\ntype = "matrix"\nhomeserver_url = "${mx.url}"\nuser_id = "${mx.userId}"\naccess_token_env = "MX_TOKEN"\nrooms = ["${mx.groupRoom}"]\nallow_from = ["*"]\n${extra}`;

/** The environment `matrixChannel` reads its token from (`token` to present another one). */
export const matrixEnv = (mx: FakeMatrix, token = mx.token): NodeJS.ProcessEnv => ({ MX_TOKEN: token });
