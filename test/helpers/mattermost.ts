import { FakeMattermost } from '../fakes/mattermost/server.js';
import { withStarted } from './fixtures.js';

/** The fake Mattermost server (REST and WebSocket), listening; closed when the test finishes. */
export const withMattermost = (): Promise<FakeMattermost> => withStarted(new FakeMattermost());

/** Channel "mm" on the fake; secret MM_TOKEN. */
export const mattermostChannel = (mm: FakeMattermost, extra = ''): string =>
  `[[channels]]\nid = "mm"\ntype = "mattermost"\nurl = "${mm.url}"\ntoken_env = "MM_TOKEN"\nallow_from = ["*"]\n${extra}`;

/** The environment `mattermostChannel` reads its token from (`token` to present another one). */
export const mattermostEnv = (mm: FakeMattermost, token = mm.token): NodeJS.ProcessEnv => ({ MM_TOKEN: token });
