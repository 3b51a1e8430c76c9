import { onTestFinished } from 'vitest';
import { TeamsAdapter } from '../../channels/teams/adapter.js';
import { ServiceUrls } from '../../channels/teams/conversations.js';
import type { HttpRoutes } from '../../src/contracts/http.js';
import { createLogger } from '../../src/observe/logger.js';
import { FakeTeams } from '../fakes/teams/server.js';
import { withStarted, withTempDir } from './fixtures.js';

/** The fake Bot Framework (OpenID metadata, JWKS, token endpoint, Connector), listening; closed when the test finishes. */
export const withTeams = (): Promise<FakeTeams> => withStarted(new FakeTeams());

/** Channel "ms" on the fake, everyone allowed; secret MS_PASSWORD. */
export const teamsChannel = (ms: FakeTeams, extra = ''): string =>
  `[[channels]]\nid = "ms"\ntype = "teams"\napp_id = "${ms.appId}"\napp_password_env = "MS_PASSWORD"\nopenid_metadata_url = "${ms.openIdUrl}"\ntoken_url = "${ms.tokenUrl}"\nallow_from = ["*"]\n${extra}`;

/** The environment `teamsChannel` reads its password from (`password` to present another one). */
export const teamsEnv = (ms: FakeTeams, password = ms.password): NodeJS.ProcessEnv => ({ MS_PASSWORD: password });

/**
 * The real Teams adapter for channel "ms" on the fake, for tests of its Connector calls: it knows
 * where `chatId` is served (as an earlier activity from that chat told it), serves no HTTP routes
 * and logs nothing. Its state dir is removed and the adapter closed when the test finishes.
 */
export function teamsAdapterOn(ms: FakeTeams, chatId: string): TeamsAdapter {
  const dir = withTempDir('teams-adapter');
  new ServiceUrls(dir, 'ms').set(chatId, ms.serviceUrl);
  const noHttp: HttpRoutes = { route: () => () => {}, upgrade: () => () => {}, has: () => false, ownOrigin: () => true };
  const adapter = new TeamsAdapter(
    {
      id: 'ms',
      appId: ms.appId,
      tenantId: undefined,
      openIdMetadataUrl: ms.openIdUrl,
      tokenUrl: ms.tokenUrl,
      http: noHttp,
      stateDir: dir,
      log: createLogger({ level: 'silent' }),
    },
    ms.password,
  );
  onTestFinished(() => adapter.close());
  return adapter;
}
