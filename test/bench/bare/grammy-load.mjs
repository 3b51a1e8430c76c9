// The load curve's floor: a minimal grammy bot that handles every update at once (not
// bot.start's one update at a time), so a burst of N chats is answered as fast as grammy and
// Node can send. Each message gets its first visible update at once (the answer's first word),
// and after the model's time (MODEL_MS) the final text as an edit: the shape of channeld's
// streamed reply with nothing else (no inbox, no pacing, no drafts in between).
import { Bot } from 'grammy';

const modelMs = Number(process.env.MODEL_MS ?? 2000);
const bot = new Bot(process.env.TG, { client: { apiRoot: process.env.API_ROOT } });
bot.on('message:text', async (ctx) => {
  const text = ctx.message.text;
  const first = await ctx.reply(text.split(' ')[0]);
  await new Promise((r) => setTimeout(r, modelMs));
  await ctx.api.editMessageText(ctx.chat.id, first.message_id, text);
});

const stop = new AbortController();
process.on('SIGTERM', () => {
  stop.abort();
  process.exit(0);
});
await bot.init();
await bot.api.deleteWebhook();
console.log('ready');
let offset = 0;
while (!stop.signal.aborted) {
  const updates = await bot.api.getUpdates({ offset, timeout: 30 }, stop.signal);
  // Not awaited: every update of a batch runs concurrently, as @grammyjs/runner would run them.
  for (const u of updates) {
    offset = u.update_id + 1;
    bot.handleUpdate(u).catch((err) => console.error(err.message));
  }
}
