// The load curve's second floor: the same bot as grammy-load.mjs with no SDK at all. Bot API
// calls go straight through one undici Pool (the client channeld's hot path uses), each update
// of a batch is handled at once, and nothing else happens: no context objects, no middleware,
// no inbox, and by default no pacing. It is the least a Node process can do per message and
// still answer the way channeld does (first word at once, the whole answer as an edit after
// MODEL_MS), so what it cannot reach on a machine, no Node daemon reaches there.
//
// PACED=1 streams the answer as channeld streams it with edits: the words arrive MODEL_MS
// apart in all (the echo agent's three words 1 s apart), each edit shows every word arrived
// so far, and an edit goes no sooner than FLOOR_MS after the previous request's answer
// (Telegram's floor as channeld keeps it). Slightly stricter than channeld, which may hold a
// draft edit back while a burst's first messages are still going out (src/stream/reply-stream.ts)
// and never retries here. What that bot cannot reach, no Node daemon that streams drafts at
// Telegram's pace reaches there.
import { Pool } from 'undici';

const modelMs = Number(process.env.MODEL_MS ?? 2000);
const paced = process.env.PACED === '1';
const floorMs = Number(process.env.FLOOR_MS ?? 1000);
const root = new URL(process.env.API_ROOT);
const pool = new Pool(root.origin, { connections: 64 });
const base = `${root.pathname.replace(/\/$/, '')}/bot${process.env.TG}/`;
const stop = new AbortController();

async function call(method, body) {
  const res = await pool.request({
    method: 'POST',
    path: base + method,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: stop.signal,
  });
  const json = await res.body.json();
  if (!json.ok) throw new Error(`${method}: ${json.description}`);
  return json.result;
}

const sleepUntil = (atMs) => new Promise((r) => setTimeout(r, Math.max(0, atMs - Date.now())));

/** The paced reply: first word at once, then edits at most one per FLOOR_MS after each answer. */
async function handlePaced(m) {
  const start = Date.now();
  const words = m.text.split(' ');
  const stepMs = modelMs / (words.length - 1);
  const first = await call('sendMessage', { chat_id: m.chat.id, text: words[0] });
  let shown = 1;
  let nextAtMs = Date.now() + floorMs;
  while (shown < words.length) {
    await sleepUntil(Math.max(nextAtMs, start + shown * stepMs));
    shown = Math.min(words.length, Math.max(shown + 1, 1 + Math.floor((Date.now() - start) / stepMs)));
    await call('editMessageText', { chat_id: m.chat.id, message_id: first.message_id, text: words.slice(0, shown).join(' ') });
    nextAtMs = Date.now() + floorMs;
  }
}

async function handle(update) {
  const m = update.message;
  if (!m?.text) return;
  if (paced) return handlePaced(m);
  const first = await call('sendMessage', { chat_id: m.chat.id, text: m.text.split(' ')[0] });
  await new Promise((r) => setTimeout(r, modelMs));
  await call('editMessageText', { chat_id: m.chat.id, message_id: first.message_id, text: m.text });
}

process.on('SIGTERM', () => {
  stop.abort();
  process.exit(0);
});
await call('deleteWebhook', {});
console.log('ready');
let offset = 0;
while (!stop.signal.aborted) {
  const updates = await call('getUpdates', { offset, timeout: 30 });
  for (const u of updates) {
    offset = u.update_id + 1;
    handle(u).catch((err) => console.error(err.message));
  }
}
