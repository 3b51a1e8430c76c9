import { describe, expect, it } from 'vitest';
import type { FakeLlm } from '../fakes/llm/server.js';
import type { FakeTelegram } from '../fakes/telegram/server.js';
import { waitFor } from '../helpers/daemon.js';
import { withChannelDaemon, withLlm } from '../helpers/fixtures.js';
import { telegramChannel, telegramEnv, withTelegram } from '../helpers/platforms.js';

const ADA = { id: 62, first_name: 'Ada' };
const TEAL = 'my favourite colour is teal';
const PORTO = 'I live in the city of Porto';
const QUESTION = 'what should I paint the door with';

describe('memory recall by embeddings (memory_embedding_model)', () => {
  it('ranks memories by similarity to the message, and falls back to full-text search (logged) when the embeddings call fails', async () => {
    const tg: FakeTelegram = await withTelegram();
    const llm: FakeLlm = await withLlm();
    // Room for one memory only: which one the turn gets is the ranking.
    const agent = `[agent]\nprovider = "openai-compatible"\nbase_url = "${llm.url}"\nmodel = "m"\nmemory = true\nmemory_max_chars = 110\nmemory_embedding_model = "emb-1"\n\n[models."emb-1"]\n\n`;
    const d = await withChannelDaemon(agent + telegramChannel(tg), telegramEnv(tg));
    // The question shares no word with either memory, so full-text search finds neither and
    // gives the newest (Porto); only the vectors say it is about the colour.
    llm.vectors.set(TEAL, [1, 0, 0]);
    llm.vectors.set(PORTO, [0, 1, 0]);
    llm.vectors.set(QUESTION, [0.9, 0.1, 0.2]);
    const replied = (text: string) => waitFor(() => tg.texts(ADA.id).some((t) => t.includes(text)), 15_000);
    const ask = async () => {
      const before = llm.requests.length;
      const answers = tg.texts(ADA.id).length;
      tg.dm(QUESTION, ADA);
      await waitFor(() => llm.requests.length === before + 1 && tg.texts(ADA.id).length === answers + 1, 15_000);
      return String(llm.requests[before]!.body.messages[0]!.content);
    };

    tg.dm(`/remember ${TEAL}`, ADA);
    await replied('Remembered (#1)');
    tg.dm(`/remember ${PORTO}`, ADA);
    await replied('Remembered (#2)');
    expect(llm.embeddingInputs).toEqual([TEAL, PORTO]);

    const ranked = await ask();
    expect(ranked).toContain('teal');
    expect(ranked).not.toContain('Porto');
    expect(llm.embeddingInputs.at(-1)).toBe(QUESTION);

    llm.failEmbeddings(1);
    const fallback = await ask();
    expect(fallback).toContain('Porto');
    expect(fallback).not.toContain('teal');
    expect(d.logs.entries().filter((l) => l.msg === 'memory embedding failed; full-text search stands in')).toHaveLength(1);
  });
});
