import { describe, expect, it } from 'vitest';
import type { FakeTelegram } from '../fakes/telegram/server.js';
import { waitFor } from '../helpers/daemon.js';
import { withChannelDaemon, withLlm, withTempDir } from '../helpers/fixtures.js';
import { telegramEnv, withTelegram } from '../helpers/platforms.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { echoAgent, llmAgent } from '../helpers/toml.js';

/** Channel "tg" with nothing but what it needs: rich messages and native drafts at their defaults (on). */
const defaultChannel = (tg: FakeTelegram) => `[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG_TOKEN"\napi_root = "${tg.url}"\nallow_from = ["*"]\n`;

const QUESTIONS = ['first question here', 'second question here', 'third question here', 'fourth question here'];

/** Asks each question in turn (one chat: the turns run in order) and waits for its answer. */
async function askAll(tg: FakeTelegram): Promise<void> {
  for (const q of QUESTIONS) {
    tg.dm(q);
    await waitFor(() => tg.texts(42).includes(q), 15_000);
  }
}

const isRichCall = (c: { method: string; body: Record<string, unknown> }) =>
  c.method === 'sendRichMessage' || c.method === 'sendRichMessageDraft' || (c.method === 'editMessageText' && c.body.rich_message !== undefined);

describe('Telegram: a server that fails the newer methods still gets every answer', () => {
  it('default config, every rich method answered with HTTP 500 and an HTML page: each answer arrives once, as HTML, and rich messages go off', async () => {
    const tg = await withTelegram({ richAnswer: { status: 500, body: '<html><body><h1>500 Internal Server Error</h1></body></html>' } });
    const file = writeProcessConfig(withTempDir('tgrich500'), echoAgent(40) + defaultChannel(tg));
    const p = withDaemonProcess(file, telegramEnv(tg));
    const url = await p.url();
    await askAll(tg);
    // Settled: every update confirmed and no turn running or queued, so nothing more can be sent.
    await waitFor(
      async () => tg.pendingUpdates === 0 && ((await (await fetch(`${url}/status`)).json()) as { turns: { list: unknown[] } }).turns.list.length === 0,
    );
    expect(tg.texts(42)).toEqual(QUESTIONS);
    expect(tg.messages.every((m) => m.parseMode === 'HTML' && !m.rich)).toBe(true);
    // Three failures in a row while HTML worked, then never asked again; said once.
    expect(tg.calls.filter(isRichCall)).toHaveLength(3);
    expect(p.lines.filter((l) => l.msg === 'this Bot API server keeps failing rich messages; using HTML messages from now on')).toHaveLength(1);
    expect(p.lines.some((l) => String(l.msg).includes('final reply could not be delivered'))).toBe(false);
    p.signal('SIGTERM');
    expect(await p.exited).toBe(0);
  });

  it('native drafts answered with 502 and a proxy page: answers arrive once, and drafts go off after three failures', async () => {
    const tg = await withTelegram();
    tg.fail('sendMessageDraft', { status: 502, raw: '<html>502 Bad Gateway</html>' }, 100);
    const d = await withChannelDaemon(echoAgent(40) + defaultChannel(tg), telegramEnv(tg));
    const OFF = 'this Bot API server fails native drafts';
    // A reply that ends before its first draft makes no draft call (a loaded machine), so
    // questions go until drafts are off rather than a fixed number of them.
    const asked: string[] = [];
    for (let i = 0; i < 12 && !d.logs.text.includes(OFF); i++) {
      asked.push(`question number ${i} here`);
      tg.dm(asked.at(-1)!);
      await waitFor(() => tg.texts(42).includes(asked.at(-1)!), 15_000);
    }
    expect(tg.callsOf('sendMessageDraft')).toHaveLength(3);
    await askAll(tg);
    await waitFor(() => tg.pendingUpdates === 0 && d.daemon.status().turns.list.length === 0);
    expect(tg.texts(42)).toEqual([...asked, ...QUESTIONS]);
    expect(tg.callsOf('sendMessageDraft')).toHaveLength(3);
    expect(d.logs.text.split(OFF).length - 1).toBe(1);
  });

  it('on a server without rich messages the HTML answer reads well: heading bold, bullets, the table a <pre> block', async () => {
    const tg = await withTelegram();
    const llm = await withLlm();
    const answer = '## Fruit report\n\n- apples\n- pears\n\n| Fruit | Qty |\n|---|---:|\n| apple | 3 |\n| pear | 10 |\n\nDone.';
    llm.script({ kind: 'stream', chunks: answer.match(/[\s\S]{1,20}/g)!.map((content) => ({ content, delayMs: 10 })) });
    await withChannelDaemon(llmAgent(llm.url) + defaultChannel(tg), telegramEnv(tg));
    tg.dm('how much fruit?');
    await waitFor(() => tg.messages.some((m) => m.text.endsWith('Done.')), 15_000);
    const sent = tg.messages.find((m) => !m.deleted)!;
    expect(sent.parseMode).toBe('HTML');
    expect(sent.text).toBe('<b>Fruit report</b>\n\n• apples\n• pears\n\n<pre><code>Fruit | Qty\n------+----\napple | 3\npear  | 10</code></pre>\n\nDone.');
  });

  it('a long answer on a server that fails every rich method still arrives whole, split at the HTML limit', async () => {
    const tg = await withTelegram({ richAnswer: { status: 500, body: '<html>500</html>' } });
    const llm = await withLlm();
    const answer = `${Array.from({ length: 1200 }, (_, i) => `w${i}`).join(' ')} THE END`;
    expect(answer.length).toBeGreaterThan(4096);
    llm.script({ kind: 'stream', chunks: [{ content: answer }] });
    await withChannelDaemon(`${llmAgent(llm.url)}${defaultChannel(tg)}stream_mode = "final"\n`, telegramEnv(tg));
    tg.dm('write a lot');
    await waitFor(() => tg.texts(42).join('').includes('THE END'), 30_000);
    expect(tg.texts(42).join(' ').replace(/\s+/g, ' ')).toBe(answer);
    expect(tg.messages.every((m) => m.parseMode === 'HTML')).toBe(true);
  });
});
