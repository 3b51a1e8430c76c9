import type { ChannelFactory } from '../../src/contracts/channel.js';
import { ChannelError } from '../../src/contracts/errors.js';
import type { XmppConfig } from './config.js';
import { XmppAdapter } from './adapter.js';

/** The XMPP channel. */
export const createChannel: ChannelFactory<XmppConfig> = (config, ctx) => {
  const password = ctx.secret('password');
  if (!password) throw new ChannelError('CHANNEL_AUTH_FAILED', `channel "${config.id}" has no password`, { retryable: false });
  const [local, domain] = config.jid.split('@') as [string, string];
  return new XmppAdapter({
    id: config.id,
    local,
    domain,
    password,
    service: config.server ? `xmpp://${config.server}` : `xmpp://${domain}`,
    rooms: config.rooms.map((r) => {
      const [room, nick] = r.split('/');
      return { jid: room!.toLowerCase(), nick: nick ?? local };
    }),
    connectTimeoutMs: (config as XmppConfig & { connect_timeout_ms?: number }).connect_timeout_ms ?? 30_000,
    log: ctx.log,
  });
};
