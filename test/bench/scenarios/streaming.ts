import { TelegramAdapter } from '../../../channels/telegram/adapter.js';
import type { HttpRoutes } from '../../../src/contracts/http.js';
import { createLogger } from '../../../src/observe/logger.js';
import { ReplyStream } from '../../../src/stream/reply-stream.js';
import { FakeTelegram, type Call } from '../../fakes/telegram/server.js';
import { percentile, type Row, type ScenarioOptions } from '../report.js';

/**
 * Streamed replies on the fake Bot API, through the real Telegram adapter (grammy) and
 * ReplyStream, in real time: a long stream's calls and delays; a window of 429s mid-answer
 * (edits and native drafts); and a 10,000-character answer with a code block, on a server
 * with rich messages and on one without. The three streams run side by side.
 */
export async function streaming(o: ScenarioOptions): Promise<Row[]> {
  const seconds = o.smoke ? 5 : 30;
  const windowFromMs = o.smoke ? 1000 : 10_000;
  const windowMs = o.smoke ? 1000 : 10_000;
  const [plain, limited, drafts] = await Promise.all([
    stream({ seconds }),
    stream({ seconds, window: { fromMs: windowFromMs, ms: windowMs, methods: ['editMessageText', 'sendRichMessage', 'sendMessage'] } }),
    stream({ seconds, nativeDrafts: true, window: { fromMs: windowFromMs, ms: windowMs, methods: ['sendRichMessageDraft', 'sendMessageDraft'] } }),
  ]);
  // The drafts scenario's bound, on the stream's real length (timers run a little late).
  const bound = Math.ceil(plain.streamMs / 1000) + 2;
  const rows: Row[] = [
    {
      scenario: 'streaming',
      metric: `calls per ${(plain.streamMs / 1000).toFixed(1)} s reply (rich messages)`,
      value: plain.requests,
      unit: 'calls',
      target: `≤ ${bound}`,
      met: plain.requests <= bound,
    },
    {
      scenario: 'streaming',
      metric: 'first token → first visible text',
      value: plain.firstVisibleMs,
      unit: 'ms',
      target: '≤ 150',
      met: plain.firstVisibleMs <= 150,
    },
    {
      scenario: 'streaming',
      metric: 'last token → final text (interval included)',
      value: plain.finalAfterLastMs,
      unit: 'ms',
      target: '≤ 1200',
      met: plain.finalAfterLastMs <= 1200,
    },
    {
      scenario: 'streaming',
      metric: `429 window of ${windowMs / 1000} s: calls inside it`,
      value: limited.callsInWindow,
      unit: 'calls',
      target: '≤ 3',
      met: limited.callsInWindow <= 3,
    },
    {
      scenario: 'streaming',
      metric: '429 window: end → edits back at the floor',
      value: limited.backAtFloorMs,
      unit: 'ms',
      target: '≤ 5000',
      met: limited.backAtFloorMs <= 5000,
    },
    {
      scenario: 'streaming',
      metric: '429 window: final text complete, lost + duplicated',
      value: limited.lostOrDuplicated,
      unit: 'messages',
      target: '0',
      met: limited.lostOrDuplicated === 0,
    },
    {
      scenario: 'streaming',
      metric: '429 window, native drafts: messages before the final',
      value: drafts.midAnswerMessages,
      unit: 'messages',
      target: '0',
      met: drafts.midAnswerMessages === 0 && drafts.lostOrDuplicated === 0,
    },
  ];
  // The last word, at once: a final that is a new message takes no pace slot; a final edit
  // waits only out the platform's 1 s floor after the previous edit.
  const [nativeFinal, editFinal] = await Promise.all([lastWord(true, o.smoke ? 4 : 20), lastWord(false, o.smoke ? 4 : 20)]);
  rows.push(
    {
      scenario: 'streaming',
      metric: `last token → final text p50 (p99), native drafts: a new message, ${nativeFinal.length} replies`,
      value: Math.round(percentile(nativeFinal, 50)),
      unit: `ms (${Math.round(percentile(nativeFinal, 99))})`,
      target: '≤ 50',
      met: percentile(nativeFinal, 50) <= 50,
    },
    {
      scenario: 'streaming',
      metric: `last token → final text p50 (p99), edits: the 1 s floor after the last edit, ${editFinal.length} replies`,
      value: Math.round(percentile(editFinal, 50)),
      unit: `ms (${Math.round(percentile(editFinal, 99))})`,
      target: '≤ 1050',
      met: percentile(editFinal, 99) <= 1050,
    },
  );
  for (const rich of [true, false]) {
    const long = await longAnswer(rich);
    const expected = rich ? 1 : 3;
    rows.push({
      scenario: 'streaming',
      metric: `10,000-character answer with code: messages, ${rich ? 'rich messages' : 'server without rich messages (fences balanced)'}`,
      value: long.messages,
      unit: 'messages',
      target: `${expected}`,
      met: long.messages === expected && long.complete && long.balanced,
    });
  }
  return rows;
}

const silent = createLogger({ level: 'silent' });
const noHttp: HttpRoutes = { route: () => () => {}, upgrade: () => () => {}, has: () => false, ownOrigin: () => true };
const usage = { inputTokens: 0, outputTokens: 0, estimated: true };
const tick = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
const REPLY_METHODS = new Set(['sendMessage', 'sendRichMessage', 'editMessageText', 'sendMessageDraft', 'sendRichMessageDraft', 'deleteMessage']);

async function withFake<T>(rich: boolean, nativeDrafts: boolean, fn: (tg: FakeTelegram, adapter: TelegramAdapter) => Promise<T>): Promise<T> {
  const tg = new FakeTelegram(undefined, { richMessages: rich });
  await tg.start();
  try {
    const adapter = new TelegramAdapter({ id: 'tg', apiRoot: tg.url, mode: 'polling', nativeDrafts, richMessages: true, http: noHttp, log: silent }, tg.token);
    // A connected channel has talked to the server already: one reply elsewhere warms the
    // client (and, on a server without rich messages, learns the refusal as a live bot would).
    await adapter.send({ channelId: 'tg', chatId: '1', chatType: 'dm' }, 'warm-up', { signal: new AbortController().signal });
    tg.calls.length = 0;
    tg.messages.length = 0;
    return await fn(tg, adapter);
  } finally {
    await tg.close();
  }
}

interface StreamOptions {
  seconds: number;
  nativeDrafts?: boolean;
  window?: { fromMs: number; ms: number; methods: string[] };
}

/** A streamed reply to a DM, as a turn makes one. */
function dmReply(adapter: TelegramAdapter, chatId: string, finalDeadlineMs: number): ReplyStream {
  return new ReplyStream({
    transport: adapter,
    capabilities: adapter.capabilities,
    target: { channelId: 'tg', chatId, chatType: 'dm' },
    streamMode: 'partial',
    showToolProgress: false,
    finalDeadlineMs,
    signal: new AbortController().signal,
  });
}

/** One reply at 20 tokens a second for `seconds`, to a DM on a server with rich messages. */
function stream(o: StreamOptions) {
  return withFake(true, o.nativeDrafts ?? false, async (tg, adapter) => {
    const chatId = 42;
    const s = dmReply(adapter, String(chatId), 120_000);
    const firstTokenAt = Date.now();
    let windowAt: { from: number; to: number } | undefined;
    const tokens: string[] = [];
    for (let i = 0; i < o.seconds * 20; i++) {
      if (o.window && !windowAt && Date.now() - firstTokenAt >= o.window.fromMs) {
        tg.rateLimitFor(o.window.ms, o.window.methods);
        windowAt = { from: Date.now(), to: Date.now() + o.window.ms };
      }
      tokens.push(`token${i} `);
      s.push({ type: 'text_delta', text: tokens.at(-1)! });
      // On a fixed schedule (20 a second), so late timers do not stretch the stream.
      await tick(firstTokenAt + (i + 1) * 50 - Date.now());
    }
    const midAnswerMessages = tg.messages.length;
    const lastTokenAt = Date.now();
    s.push({ type: 'done', usage });
    const result = await s.finished();
    const replyCalls = tg.calls.filter((c) => REPLY_METHODS.has(c.method));
    const firstVisible = replyCalls[0]!;
    const finalCall = replyCalls.at(-1)!;
    const answer = tokens.join('');
    const live = tg.messages.filter((m) => !m.deleted);
    const complete = live.length === 1 && live[0]!.text === answer;
    return {
      streamMs: lastTokenAt - firstTokenAt,
      requests: result.requests,
      firstVisibleMs: firstVisible.at - firstTokenAt,
      finalAfterLastMs: finalCall.at - lastTokenAt,
      callsInWindow: windowAt ? replyCalls.filter((c) => c.at >= windowAt!.from && c.at < windowAt!.to).length : 0,
      backAtFloorMs: windowAt ? backAtFloor(replyCalls, windowAt.to) : 0,
      lostOrDuplicated: complete ? 0 : Math.max(1, Math.abs(live.length - 1)),
      midAnswerMessages: o.nativeDrafts ? midAnswerMessages : 0,
    };
  });
}

/**
 * `replies` short replies side by side (one chat each), each a second or two of tokens at
 * 20 a second, ending at a different point of its pace slot; for each, the time from its
 * last token to the call that put its final text up.
 */
function lastWord(nativeDrafts: boolean, replies: number): Promise<number[]> {
  return withFake(true, nativeDrafts, (tg, adapter) =>
    Promise.all(
      Array.from({ length: replies }, async (_, r) => {
        const chatId = 100 + r;
        const s = dmReply(adapter, String(chatId), 60_000);
        // 20 to 39 tokens: the last one falls anywhere within a 1 s pace slot.
        const tokens = 20 + ((r * 7) % 20);
        const startAt = Date.now();
        for (let i = 0; i < tokens; i++) {
          s.push({ type: 'text_delta', text: `word${i} ` });
          await tick(startAt + (i + 1) * 50 - Date.now());
        }
        const lastTokenAt = Date.now();
        s.push({ type: 'done', usage });
        await s.finished();
        const finalCall = tg.calls
          .filter((c) => REPLY_METHODS.has(c.method) && !c.method.endsWith('Draft') && String(c.body?.chat_id) === String(chatId))
          .at(-1)!;
        return finalCall.at - lastTokenAt;
      }),
    ),
  );
}

/** From the window's end until two consecutive edits go about one floor (1 s) apart. */
function backAtFloor(calls: Call[], endMs: number): number {
  const after = calls.filter((c) => c.at >= endMs && c.method === 'editMessageText');
  for (let i = 1; i < after.length; i++) if (after[i]!.at - after[i - 1]!.at <= 1300) return after[i]!.at - endMs;
  // Not back before the reply ended: the whole rest of the reply.
  return (after.at(-1)?.at ?? endMs) - endMs + 1;
}

/** A 10,000-character answer with a code block, streamed in 10 pieces. */
function longAnswer(rich: boolean) {
  return withFake(rich, false, async (tg, adapter) => {
    const code = Array.from({ length: 260 }, (_, i) => `console.log("line ${i} of the example");`).join('\n');
    const answer = `## Script\n\nRun it with node:\n\n\`\`\`js\n${code}\n\`\`\`\n\nThat is all.`;
    const s = dmReply(adapter, '43', 60_000);
    for (const piece of answer.match(/[\s\S]{1,1000}/g)!) {
      s.push({ type: 'text_delta', text: piece });
      await tick(100);
    }
    s.push({ type: 'done', usage });
    await s.finished();
    const live = tg.messages.filter((m) => !m.deleted);
    const visible = tg.texts(43).join('\n');
    return {
      messages: live.length,
      complete: Array.from({ length: 260 }, (_, i) => `line ${i} of`).every((l) => visible.includes(l)) && visible.includes('That is all.'),
      balanced: live.every((m) => (m.rich ? (m.text.match(/^```/gm) ?? []).length % 2 === 0 : m.text.split('<pre>').length === m.text.split('</pre>').length)),
    };
  });
}
