// The peer baseline: the Vercel Chat SDK with its Telegram adapter as an echo bot, polling the
// same fake Bot API. In-memory state (the SDK's own adapter for it); every message is answered
// ("concurrent": the default "drop" discards a message that arrives while its chat is busy).
import { createMemoryState } from '@chat-adapter/state-memory';
import { createTelegramAdapter } from '@chat-adapter/telegram';
import { Chat } from 'chat';

const telegram = createTelegramAdapter({ botToken: process.env.TG, apiBaseUrl: process.env.API_ROOT, mode: 'polling', userName: 'bench_bot' });
const bot = new Chat({ userName: 'bench_bot', adapters: { telegram }, state: createMemoryState(), logger: 'error', concurrency: 'concurrent' });
const echo = (thread, message) => thread.post(message.text);
bot.onDirectMessage(echo);
bot.onNewMention(echo);
process.on('SIGTERM', () => bot.shutdown().then(() => process.exit(0)));
await bot.initialize();
console.log('ready');
