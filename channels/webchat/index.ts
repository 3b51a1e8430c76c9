import { defineChannel } from '../../src/contracts/channel.js';
import { webchatConfig } from './config.js';

/** The local web chat: a page and a WebSocket on the daemon's own HTTP server. */
export const webchat = defineChannel({
  kind: 'webchat',
  summary: 'a chat page served by the daemon itself (/, /chat)',
  config: webchatConfig,
  // The access token is given by variable only (`access_token_env`), and it is optional.
  secrets: { names: ['access_token'], needs: () => ({ required: [], optional: ['access_token'] }) },
  // The page is local and may carry an access token: allow_from adds nothing.
  allowFromOptional: true,
  // Each instance serves the page to whoever connects to it.
  exclusiveListener: () => false,
  page: 'web chat',
  load: async () => (await import('./factory.js')).createChannel,
});
