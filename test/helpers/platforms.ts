import { SlackAdapter } from '../../channels/slack/adapter.js';
import { HttpServer } from '../../src/observe/http-server.js';
import { createLogger } from '../../src/observe/logger.js';
import { FakeDiscord } from '../fakes/discord/server.js';
import { FakeSlack } from '../fakes/slack/server.js';
import { FakeTelegram, type FakeTelegramOptions } from '../fakes/telegram/server.js';
import { LogSink } from './daemon.js';
import { withStarted } from './fixtures.js';

/**
 * One fixture per platform fake: started, closed when the test finishes (see fixtures.ts for
 * the order), plus the `[[channels]]` table and the secrets that point a daemon at it. Start
 * the fake before the daemon so the daemon is stopped first.
 */

/** The fake Telegram Bot API, listening. */
export const withTelegram = (options?: FakeTelegramOptions): Promise<FakeTelegram> => withStarted(new FakeTelegram(undefined, options));

/** Channel "tg" on the fake, long polling, answers edited in place (no native drafts); secret TG_TOKEN. */
export const telegramChannel = (tg: FakeTelegram, extra = ''): string =>
  `[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG_TOKEN"\napi_root = "${tg.url}"\nallow_from = ["*"]\nnative_drafts = false\n${extra}`;

/** The environment `telegramChannel` reads its token from. */
export const telegramEnv = (tg: FakeTelegram): NodeJS.ProcessEnv => ({ TG_TOKEN: tg.token });

/** The fake Slack (Web API and Socket Mode), listening. */
export const withSlack = (): Promise<FakeSlack> => withStarted(new FakeSlack());

/** Channel "sl" on the fake in Socket Mode; secrets SL_BOT and SL_APP. */
export const slackChannel = (sl: FakeSlack, extra = ''): string =>
  `[[channels]]\nid = "sl"\ntype = "slack"\nbot_token_env = "SL_BOT"\napp_token_env = "SL_APP"\napi_url = "${sl.apiUrl}"\nallow_from = ["*"]\n${extra}`;

/**
 * A Slack adapter on the fake, as the daemon builds one for channel "sl" (Socket Mode, replies in
 * threads, native streams), for tests of its calls; errors only are logged, to nowhere, or with
 * `logs` warnings and errors to it.
 */
export const slackAdapterOn = (sl: FakeSlack, o: { listens?: boolean; reconnectMaxDelayMs?: number; logs?: LogSink } = {}): SlackAdapter =>
  new SlackAdapter(
    {
      id: 'sl',
      mode: 'socket',
      apiUrl: sl.apiUrl,
      replyInThread: true,
      nativeStream: true,
      http: new HttpServer(),
      log: createLogger({ level: o.logs ? 'warn' : 'error', destination: o.logs ?? new LogSink(), pretty: false }),
      ...(o.reconnectMaxDelayMs ? { reconnectMaxDelayMs: o.reconnectMaxDelayMs } : {}),
    },
    // With `listens`, the app token Socket Mode connects with.
    { botToken: sl.botToken, ...(o.listens ? { appToken: sl.appToken } : {}) },
  );

/** Channel "sl" on the fake in HTTP events mode (route /webhooks/sl); secrets SL_BOT and SL_SIGN. */
export const slackHttpChannel = (sl: FakeSlack, extra = ''): string =>
  `[[channels]]\nid = "sl"\ntype = "slack"\nmode = "http"\nbot_token_env = "SL_BOT"\nsigning_secret_env = "SL_SIGN"\napi_url = "${sl.apiUrl}"\nallow_from = ["*"]\n${extra}`;

/** The environment both Slack tables read their secrets from. */
export const slackEnv = (sl: FakeSlack, signingSecret?: string): NodeJS.ProcessEnv => ({
  SL_BOT: sl.botToken,
  SL_APP: sl.appToken,
  ...(signingSecret ? { SL_SIGN: signingSecret } : {}),
});

/** The fake Discord gateway and REST API, listening. */
export const withDiscord = (): Promise<FakeDiscord> => withStarted(new FakeDiscord());

/** Channel "dc" on the fake; secret DC_TOKEN. */
export const discordChannel = (dc: FakeDiscord, extra = ''): string =>
  `[[channels]]\nid = "dc"\ntype = "discord"\ntoken_env = "DC_TOKEN"\nrest_api = "${dc.restApi}"\nallow_from = ["*"]\n${extra}`;

/** The environment `discordChannel` reads its token from (`token` to present another one). */
export const discordEnv = (dc: FakeDiscord, token = dc.token): NodeJS.ProcessEnv => ({ DC_TOKEN: token });
