import Database from 'better-sqlite3';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { HELD_REPLY, NOT_KEPT_REPLY } from '../../src/dispatch/dispatcher.js';
import { waitFor } from '../helpers/daemon.js';
import { withLlm, withTempDir } from '../helpers/fixtures.js';
import { telegramChannel, telegramEnv, withTelegram } from '../helpers/platforms.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { scaled } from '../helpers/timing.js';
import { echoAgent, llmAgent } from '../helpers/toml.js';

/** Episodes of another process's write lock, and messages sent through them (CHANNELD_LOCK_EPISODES scales a long run). */
const EPISODES = Number(process.env.CHANNELD_LOCK_EPISODES ?? 3);
const CHATS = 10;

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('Telegram under repeated foreign write locks', () => {
  it(
    `${EPISODES} lock episodes (1.5-3 s) while messages keep coming on ${CHATS} chats: every message answered exactly once, nothing stray`,
    async () => {
      const tg = await withTelegram();
      const dir = withTempDir('lockeps');
      // Streamed in steps, so a lock falls between a reply's first send, its edits and its final state.
      const file = writeProcessConfig(dir, echoAgent(30) + telegramChannel(tg, '[channels.backoff]\ninitial_ms = 100\nmax_ms = 500\n'));
      const p = withDaemonProcess(file, telegramEnv(tg));
      const url = await p.url();
      await waitFor(async () => ((await (await fetch(`${url}/status`)).json()) as { ready: boolean }).ready, 15_000);
      const db = join(dir, 'state', 'channeld.db');

      const sent: Array<{ chat: number; text: string }> = [];
      let n = 0;
      let sending = true;
      const traffic = (async () => {
        while (sending) {
          const chat = 9000 + (n % CHATS);
          const text = `lk-${n} a b c d e`;
          tg.dm(text, { id: chat, first_name: 'u' });
          sent.push({ chat, text });
          n++;
          await pause(120);
        }
      })();
      for (let e = 0; e < EPISODES; e++) {
        await pause(700);
        const other = new Database(db);
        try {
          other.exec('BEGIN IMMEDIATE');
          await pause(1500 + (e % 3) * 750);
          other.exec('ROLLBACK');
        } finally {
          other.close();
        }
      }
      await pause(500);
      sending = false;
      await traffic;

      // Settled: every update confirmed to Telegram, nothing running, waiting or held.
      await waitFor(
        async () => {
          const s = (await (await fetch(`${url}/status`)).json()) as {
            turns: { list: unknown[] };
            storage: { state: string };
            channels: Array<{ held: number }>;
          };
          return tg.pendingUpdates === 0 && s.turns.list.length === 0 && s.storage.state === 'ok' && s.channels.every((c) => !c.held);
        },
        scaled(60_000),
        50,
      );
      const problems: string[] = [];
      for (const m of sent) {
        const answers = tg.texts(m.chat).filter((t) => t === m.text).length;
        if (answers !== 1) problems.push(`${m.text} (chat ${m.chat}) answered ${answers} times`);
      }
      const mine = new Set(sent.map((m) => m.text));
      for (let c = 0; c < CHATS; c++) {
        for (const t of tg.texts(9000 + c)) if (!mine.has(t) && t !== HELD_REPLY) problems.push(`stray in chat ${9000 + c}: ${t.slice(0, 60)}`);
        // At most one notice per conversation per episode.
        expect(tg.texts(9000 + c).filter((t) => t === HELD_REPLY).length).toBeLessThanOrEqual(EPISODES);
        expect(tg.texts(9000 + c)).not.toContain(NOT_KEPT_REPLY);
      }
      console.log(
        `lock episodes: ${EPISODES}, sent ${sent.length}, sendMessage ${tg.callsOf('sendMessage').length}, problems ${problems.length}${problems.length ? `: ${problems.join('; ')}` : ''}`,
      );
      if (problems.length) {
        const warned = p.lines.filter((l) => typeof l.level === 'number' && l.level >= 40).map((l) => JSON.stringify(l).slice(0, 400));
        console.log(`daemon warnings and errors:\n${warned.join('\n')}`);
      }
      expect(problems).toEqual([]);
      onTestFinished(() => p.signal('SIGKILL'));
    },
    scaled(120_000),
  );

  it('kill -9 while another process holds the write lock, after the model wrote its first words: the restarted process answers once (no message whose id could not be stored)', async () => {
    const tg = await withTelegram();
    const llm = await withLlm();
    const dir = withTempDir('lockkill');
    const file = writeProcessConfig(dir, llmAgent(llm.url) + telegramChannel(tg));
    const env = telegramEnv(tg);
    // The first words come once the lock is surely taken; then the model stalls, so the turn
    // is mid-answer whenever the kill lands. The restarted process gets the fake's default answer.
    llm.script({ kind: 'stall', chunks: [{ content: 'first words ', delayMs: scaled(3000) }] });
    const p1 = withDaemonProcess(file, env);
    await p1.url();
    tg.dm('answer me once');
    await waitFor(() => llm.requests.length === 1, 15_000);
    const other = new Database(join(dir, 'state', 'channeld.db'));
    other.exec('BEGIN IMMEDIATE');
    let locked = true;
    onTestFinished(() => {
      if (locked) other.exec('ROLLBACK');
      other.close();
    });
    // Before the fix the first words are sent while their message id cannot be stored; after
    // it the reply waits for the store to take writes.
    await waitFor(() => tg.messages.length > 0 || p1.lines.some((l) => l.msg === 'a reply waits for storage before it sends a new message'), 20_000);
    p1.signal('SIGKILL');
    await p1.exited;
    other.exec('ROLLBACK');
    locked = false;

    const p2 = withDaemonProcess(file, env);
    const url = await p2.url();
    await waitFor(
      async () =>
        tg.pendingUpdates === 0 &&
        ((await (await fetch(`${url}/status`)).json()) as { turns: { list: unknown[] } }).turns.list.length === 0 &&
        llm.requests.length === 2,
      20_000,
    );
    await waitFor(() => tg.texts(42).length > 0, 10_000);
    expect(tg.texts(42)).toEqual(['answer me once']);
    expect(tg.callsOf('sendMessage')).toHaveLength(1);
  });
});
