// The load curve's second floor: the same bot as grammy-load.mjs with no SDK at all. Bot API
// calls go straight through one undici Pool (the client channeld's hot path uses), each update
// of a batch is handled at once, and nothing else happens: no context objects, no middleware,
// no inbox, no pacing. It is the least a Node process can do per message and still answer
// the way channeld does (first word at once, the whole answer as an edit after MODEL_MS), so
// what it cannot reach on a machine, no Node daemon reaches there.
import { Pool } from 'undici';

const modelMs = Number(process.env.MODEL_MS ?? 2000);
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

async function handle(update) {
  const m = update.message;
  if (!m?.text) return;
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
