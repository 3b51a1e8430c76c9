// The start-up floor: a process that loads the same three SDKs, connects each to the same
// fakes, and answers /readyz once all are connected.
import { createServer } from 'node:http';
import { Api } from 'grammy';
import { Client, GatewayIntentBits, Partials } from 'discord.js';
import { SocketModeClient } from '@slack/socket-mode';

let ready = false;
// Port 0: the OS picks a free one, and the parent reads it from the first line on stdout.
const server = createServer((_req, res) => res.writeHead(ready ? 200 : 503).end());
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: server.address().port })));
const tg = new Api(process.env.TG, { apiRoot: process.env.API_ROOT });
const discord = new Client({
  intents: [GatewayIntentBits.Guilds, GatewayIntentBits.GuildMessages, GatewayIntentBits.MessageContent, GatewayIntentBits.DirectMessages],
  partials: [Partials.Channel],
  rest: { api: process.env.REST_API },
});
const slack = new SocketModeClient({ appToken: process.env.SL_APP, clientOptions: { slackApiUrl: process.env.SLACK_API } });
await Promise.all([tg.getMe().then(() => tg.deleteWebhook()), discord.login(process.env.DC), slack.start()]);
ready = true;
process.on('SIGTERM', () => process.exit(0));
