import { defineChannel } from '../../src/contracts/channel.js';
import { ircConfig } from './config.js';

/** IRC: one client connection (node:net / node:tls, no SDK), channels and private messages. */
export const irc = defineChannel({
  kind: 'irc',
  summary: 'an IRC client: channels and private messages',
  config: ircConfig,
  secrets: { names: ['password'], needs: () => ({ required: [], optional: ['password'] }) },
  // One connection per nick: a second instance would take the nick or answer twice.
  exclusiveListener: () => true,
  load: async () => (await import('./factory.js')).createChannel,
});
