import { defineChannel } from '../../src/contracts/channel.js';
import { mattermostConfig } from './config.js';

/** Mattermost bot accounts: the WebSocket API in, REST posts out. */
export const mattermost = defineChannel({
  kind: 'mattermost',
  summary: 'a Mattermost bot account, over the WebSocket API',
  config: mattermostConfig,
  secrets: { names: ['token'], needs: () => ({ required: ['token'], optional: [] }) },
  // Every socket of the bot gets every event: two instances would answer each message twice.
  exclusiveListener: () => true,
  load: async () => (await import('./factory.js')).createChannel,
});
