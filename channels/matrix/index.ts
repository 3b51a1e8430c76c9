import { defineChannel } from '../../src/contracts/channel.js';
import { matrixConfig } from './config.js';

/** A Matrix bot account: /sync long polling, replies over the client-server API. */
export const matrix = defineChannel({
  kind: 'matrix',
  summary: 'a Matrix account, by /sync long polling',
  config: matrixConfig,
  secrets: { names: ['access_token'], needs: () => ({ required: ['access_token'], optional: [] }) },
  // Two /sync loops on one token would each store their own `since`: one instance at a time.
  exclusiveListener: () => true,
  load: async () => (await import('./factory.js')).createChannel,
});
