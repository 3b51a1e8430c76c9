import { FakeTeams } from '../fakes/teams/server.js';
import { withStarted } from './fixtures.js';

/** The fake Bot Framework (OpenID metadata, JWKS, token endpoint, Connector), listening; closed when the test finishes. */
export const withTeams = (): Promise<FakeTeams> => withStarted(new FakeTeams());

/** Channel "ms" on the fake, everyone allowed; secret MS_PASSWORD. */
export const teamsChannel = (ms: FakeTeams, extra = ''): string =>
  `[[channels]]\nid = "ms"\ntype = "teams"\napp_id = "${ms.appId}"\napp_password_env = "MS_PASSWORD"\nopenid_metadata_url = "${ms.openIdUrl}"\ntoken_url = "${ms.tokenUrl}"\nallow_from = ["*"]\n${extra}`;

/** The environment `teamsChannel` reads its password from (`password` to present another one). */
export const teamsEnv = (ms: FakeTeams, password = ms.password): NodeJS.ProcessEnv => ({ MS_PASSWORD: password });
