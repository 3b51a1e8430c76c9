// The bare SDK baseline: a grammy echo bot in a few lines, polling the same fake Bot API.
import { Bot } from 'grammy';

const bot = new Bot(process.env.TG, { client: { apiRoot: process.env.API_ROOT } });
bot.on('message:text', (ctx) => ctx.reply(ctx.message.text));
bot.catch((err) => console.error(err.message));
process.on('SIGTERM', () => bot.stop().then(() => process.exit(0)));
await bot.start({ onStart: () => console.log('ready') });
