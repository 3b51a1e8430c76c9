import { defineChannel } from '../../src/contracts/channel.js';
import { xmppConfig } from './config.js';

/** XMPP (@xmpp/client): one-to-one chats and group chats (MUC). */
export const xmpp = defineChannel({
  kind: 'xmpp',
  summary: 'an XMPP account: one-to-one chats and group chats (MUC)',
  config: xmppConfig,
  secrets: { names: ['password'], needs: () => ({ required: ['password'], optional: [] }) },
  // One session per account resource: a second instance would answer every message again.
  exclusiveListener: () => true,
  load: async () => (await import('./factory.js')).createChannel,
});
