import { defineChannel } from '../../src/contracts/channel.js';
import { slackConfig } from './config.js';

/** Slack apps (@slack/bolt): Socket Mode or HTTP events. */
export const slack = defineChannel({
  kind: 'slack',
  summary: 'a Slack app, over Socket Mode or HTTP events',
  config: slackConfig,
  secrets: {
    names: ['bot_token', 'app_token', 'signing_secret'],
    needs: (c) =>
      c.mode === 'http'
        ? { required: ['bot_token', 'signing_secret'], optional: ['app_token'] }
        : { required: ['bot_token', 'app_token'], optional: ['signing_secret'] },
    shapes: {
      bot_token: { pattern: /^xoxb-/, expected: 'a bot token, "xoxb-…" (OAuth & Permissions)' },
      app_token: { pattern: /^xapp-/, expected: 'an app-level token, "xapp-…" (Basic Information, with connections:write)' },
      signing_secret: { pattern: /^[0-9a-f]{32}$/, expected: 'the signing secret, 32 hex digits (Basic Information)' },
    },
  },
  // Socket Mode spreads events over a bot's sockets, so two would split them; HTTP events go to any instance.
  exclusiveListener: (c) => c.mode === 'socket',
  load: async () => (await import('./factory.js')).createChannel,
});
