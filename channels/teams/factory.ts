import type { ChannelFactory } from '../../src/contracts/channel.js';
import { ChannelError } from '../../src/contracts/errors.js';
import { TeamsAdapter } from './adapter.js';
import type { TeamsConfig } from './config.js';

/** The Teams channel (Bot Framework over fetch; tokens verified with jose). */
export const createChannel: ChannelFactory<TeamsConfig> = (config, ctx) => {
  const password = ctx.secret('app_password');
  if (!password) throw new ChannelError('CHANNEL_AUTH_FAILED', `channel "${config.id}" has no app_password`, { retryable: false });
  return new TeamsAdapter(
    {
      id: config.id,
      appId: config.app_id,
      tenantId: config.tenant_id,
      openIdMetadataUrl: config.openid_metadata_url,
      // A multi-tenant app gets its tokens from the botframework.com tenant, a single-tenant app from its own.
      tokenUrl: config.token_url ?? `https://login.microsoftonline.com/${config.tenant_id ?? 'botframework.com'}/oauth2/v2.0/token`,
      http: ctx.http,
      stateDir: ctx.stateDir,
      log: ctx.log,
    },
    password,
  );
};
