import { defineChannel } from '../../src/contracts/channel.js';
import { teamsConfig } from './config.js';

/** A Microsoft Teams bot (Bot Framework): activities posted to /webhooks/<id>, replies to their serviceUrl. */
export const teams = defineChannel({
  kind: 'teams',
  summary: 'a Microsoft Teams bot (Bot Framework), by webhook',
  config: teamsConfig,
  secrets: { names: ['app_password'], needs: () => ({ required: ['app_password'], optional: [] }) },
  // A webhook: every instance behind the balancer takes activities.
  exclusiveListener: () => false,
  load: async () => (await import('./factory.js')).createChannel,
});
