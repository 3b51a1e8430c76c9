import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { Api } from 'grammy';
import { Pool } from 'undici';
import { HotBotApi } from '../../channels/telegram/hot-api.js';
import { agentFetch } from '../../src/util/agent-fetch.js';
import { dispatchAnswer } from '../../src/util/dispatch-answer.js';
import { httpJson } from '../../src/util/http-json.js';

/**
 * Client CPU of one Bot API `sendMessage` on each HTTP path, in isolation: N sequential calls
 * against a keep-alive JSON server in another process (so only the client's CPU is counted),
 * process.cpuUsage around them, after a warm-up. `npx tsx test/bench/http-client.ts [calls] [runs]`
 */
const CALLS = Number(process.argv[2] ?? 4000);
const RUNS = Number(process.argv[3] ?? 2);

const SERVER = `
const http = require('node:http');
const body = JSON.stringify({ ok: true, result: { message_id: 1, date: 0, chat: { id: 1, type: 'private' }, text: 'hi' } });
const s = http.createServer((req, res) => { req.resume(); req.on('end', () => { res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }); res.end(body); }); });
s.keepAliveTimeout = 60000;
s.listen(0, '127.0.0.1', () => process.stdout.write(String(s.address().port) + '\\n'));
`;

async function main(): Promise<void> {
  const server = spawn(process.execPath, ['-e', SERVER], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const [chunk] = (await once(server.stdout!, 'data')) as [Buffer];
    const root = `http://127.0.0.1:${chunk.toString().trim()}`;
    const token = '1:bench';
    const payload = { chat_id: 1, text: 'hello there', parse_mode: 'HTML' };
    const grammyDefault = new Api(token, { apiRoot: root });
    const hot = new HotBotApi(token, root);
    const pool = new Pool(root, { connections: 8 });
    const paths: Record<string, () => Promise<unknown>> = {
      'grammy (node-fetch, its default)': () => grammyDefault.sendMessage(1, 'hello there', { parse_mode: 'HTML' }),
      // Each row but grammy's own is given a signal per call, as platformCaller gives one.
      'HotBotApi (channeld now)': () => hot.sendMessage(1, 'hello there', { parse_mode: 'HTML' }, AbortSignal.timeout(30_000) as never),
      'global fetch': async () => {
        const res = await fetch(`${root}/bot${token}/sendMessage`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(payload),
          signal: AbortSignal.timeout(30_000),
        });
        return res.json();
      },
      // The path of Mattermost's, Matrix's, Teams' and WhatsApp's REST calls (global fetch before).
      'httpJson (the other REST platforms)': () =>
        httpJson(`${root}/bot${token}/sendMessage`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(payload),
          signal: AbortSignal.timeout(30_000),
          maxAnswerBytes: 1024 * 1024,
        }),
      // What Slack's WebClient is given as its fetch.
      'agentFetch (the Slack client)': async () => {
        const res = await agentFetch(`${root}/bot${token}/sendMessage`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(payload),
          redirect: 'error',
          signal: AbortSignal.timeout(30_000),
        });
        return res.json();
      },
      // The path HotBotApi took before the fifteenth round.
      'undici Pool.request': async () => {
        const res = await pool.request({
          path: `/bot${token}/sendMessage`,
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(payload),
          signal: AbortSignal.timeout(30_000),
        });
        return res.body.json();
      },
      'undici dispatch (dispatchAnswer)': async () => {
        const { body } = await dispatchAnswer(
          pool,
          { path: `/bot${token}/sendMessage`, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(payload) },
          AbortSignal.timeout(30_000),
          1024 * 1024,
        );
        return JSON.parse(body!.toString('utf8'));
      },
    };
    const results: Record<string, number[]> = {};
    for (let run = 0; run < RUNS; run++) {
      // Interleaved: each run measures every path once, so drift in the machine's load hits all alike.
      for (const [name, call] of Object.entries(paths)) {
        for (let i = 0; i < 200; i++) await call();
        const before = process.cpuUsage();
        for (let i = 0; i < CALLS; i++) await call();
        const used = process.cpuUsage(before);
        (results[name] ??= []).push((used.user + used.system) / 1000 / CALLS);
      }
    }
    for (const [name, ms] of Object.entries(results)) console.log(`${name.padEnd(38)} ${ms.map((m) => m.toFixed(3)).join(' / ')} ms CPU per call`);
    await pool.close();
    await hot.close();
  } finally {
    server.kill();
  }
}

await main();
