import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { withChannelDaemon } from '../helpers/fixtures.js';
import { telegramChannel, telegramEnv, withTelegram } from '../helpers/platforms.js';

describe('/memory in a group', () => {
  it("lists nothing there (the group would read every memory of the speaker's, those kept in a DM too) and points to a DM", async () => {
    const tg = await withTelegram();
    await withChannelDaemon(`[agent]\nprovider = "echo"\nmemory = true\n\n${telegramChannel(tg)}`, telegramEnv(tg));
    const ada = { id: 63, first_name: 'Ada' };
    tg.dm('/remember my door code is 4711', ada);
    await waitFor(() => tg.texts(ada.id).some((t) => t.startsWith('Remembered')), 15_000);
    const chatId = -1005000;
    tg.group(`/memory@${tg.bot.username}`, { chatId, from: ada, command: true });
    await waitFor(() => tg.texts(chatId).length === 1, 15_000);
    expect(tg.texts(chatId)[0]).toBe('I list your memories only in a direct message: send me /memory there.');
    tg.dm('/memory', ada);
    await waitFor(() => tg.texts(ada.id).some((t) => t.includes('4711')), 15_000);
  });
});
