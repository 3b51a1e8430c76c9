import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { linkAddressPolicy } from '../../src/media/links.js';
import { isLocalAddress } from '../../src/util/address-policy.js';
import type { FakeLlm, RecordedRequest } from '../fakes/llm/server.js';
import type { FakeTelegram } from '../fakes/telegram/server.js';
import { waitFor } from '../helpers/daemon.js';
import { withChannelDaemon, withLlm } from '../helpers/fixtures.js';
import { telegramChannel, telegramEnv, withTelegram } from '../helpers/platforms.js';

const ARTICLE = `<!doctype html><html><head><title>Teal ducks</title><script>var leak = "SCRIPT-TEXT";</script></head>
<body><nav>Home | About | Login</nav><article><h1>Teal ducks</h1>
<p>The Eurasian teal is a common and widespread duck that breeds in temperate Eurasia.</p>
<p>It is named for its colour, a deep blue-green, which gave the colour teal its name.</p></article>
<footer>Copyright nobody</footer></body></html>`;

/** The last user message of a request, as text. */
function userText(req: RecordedRequest): string {
  const last = [...req.body.messages].reverse().find((m) => m.role === 'user')!;
  return typeof last.content === 'string' ? last.content : JSON.stringify(last.content);
}

/** An HTTP server on `host` that records the paths asked for. */
async function site(
  host: string,
  handle: (path: string, res: import('node:http').ServerResponse) => void,
): Promise<{ server: Server; base: string; hits: string[] }> {
  const hits: string[] = [];
  const server = createServer((req, res) => {
    hits.push(req.url ?? '');
    handle(req.url ?? '', res);
  });
  await new Promise<void>((r) => server.listen(0, host, () => r()));
  return { server, base: `http://${host}:${(server.address() as AddressInfo).port}`, hits };
}

describe('[agent] read_links', () => {
  let pub: Awaited<ReturnType<typeof site>>;
  let local: Awaited<ReturnType<typeof site>>;
  let tg: FakeTelegram;
  let llm: FakeLlm;
  const defaultPolicy = linkAddressPolicy.isLocal;

  beforeAll(async () => {
    // No public host is reachable offline: 127.0.0.2 stands in for one, every other local address stays local.
    linkAddressPolicy.isLocal = (a) => a !== '127.0.0.2' && isLocalAddress(a);
    local = await site('127.0.0.1', (_p, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('SECRET-LOCAL-ADMIN-PAGE'));
    pub = await site('127.0.0.2', (path, res) => {
      if (path === '/to-local') return void res.writeHead(302, { location: `${local.base}/admin` }).end();
      if (path === '/stall') return void res.writeHead(200, { 'content-type': 'text/html' }).write('<html>'); // and nothing more
      if (path.startsWith('/plain')) return void res.writeHead(200, { 'content-type': 'text/plain' }).end(`plain text of ${path}`);
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(ARTICLE);
    });
  });
  afterAll(async () => {
    linkAddressPolicy.isLocal = defaultPolicy;
    for (const s of [pub, local]) {
      s.server.closeAllConnections();
      await new Promise<void>((r) => s.server.close(() => r()));
    }
  });
  beforeEach(async () => {
    tg = await withTelegram();
    llm = await withLlm();
    pub.hits.length = 0;
    local.hits.length = 0;
  });

  const start = (agentExtra: string, limits = '') =>
    withChannelDaemon(
      `${limits}[agent]\nprovider = "openai-compatible"\nbase_url = "${llm.url}"\nmodel = "chat-1"\n${agentExtra}\n\n${telegramChannel(tg)}`,
      telegramEnv(tg),
    );

  it("a link's readable text reaches the model with its source; a link to 127.0.0.1 does not", async () => {
    llm.script({ kind: 'stream', chunks: [{ content: 'Done.' }] });
    await start('read_links = true');
    tg.dm(`compare ${pub.base}/teal and ${local.base}/admin.`);
    await waitFor(() => tg.texts(42).at(-1)?.endsWith('Done.'), 10_000);
    const text = userText(llm.requests[0]!);
    expect(text).toContain(`<link url="${pub.base}/teal" title="Teal ducks">`);
    expect(text).toContain('The Eurasian teal is a common and widespread duck');
    expect(text).toContain('gave the colour teal its name.');
    expect(text).not.toContain('SCRIPT-TEXT');
    expect(text).not.toContain('SECRET-LOCAL');
    expect(text).toContain(`[link ${local.base}/admin not read: it points to a local or private address]`);
    expect(local.hits).toEqual([]);
    expect(tg.texts(42).at(-1)).toMatch(
      new RegExp(`^ℹ️ I could not read ${local.base.replace(/\./g, '\\.')}/admin: it points to a local or private address\\.`),
    );
  });

  it('a redirect to a local address is refused; at most 3 links are read; off by default', async () => {
    const first = await start('read_links = true');
    tg.dm(`${pub.base}/to-local ${pub.base}/plain1 ${pub.base}/plain2 ${pub.base}/plain3`);
    await waitFor(() => llm.requests.length === 1, 10_000);
    const text = userText(llm.requests[0]!);
    expect(text).toContain(`[link ${pub.base}/to-local not read: refused a redirect to a local address`);
    expect(text).toContain('plain text of /plain1');
    expect(text).toContain('plain text of /plain2');
    expect(text).not.toContain('/plain3</link>');
    expect(pub.hits.sort()).toEqual(['/plain1', '/plain2', '/to-local']);
    expect(local.hits).toEqual([]);
    await waitFor(() => tg.texts(42).length === 1, 10_000);
    await first.stop();

    // Without read_links the same message is only text.
    await start('');
    tg.dm(`${pub.base}/teal`);
    await waitFor(() => llm.requests.length === 2, 10_000);
    expect(userText(llm.requests[1]!)).not.toContain('Eurasian teal');
    expect(pub.hits).toHaveLength(3);
  });

  it('a page that stalls is given up after attachment_timeout_ms, and the turn goes on', async () => {
    await start('read_links = true', '[limits]\nattachment_timeout_ms = 300\n\n');
    tg.dm(`what is at ${pub.base}/stall`);
    await waitFor(() => llm.requests.length === 1, 15_000);
    expect(userText(llm.requests[0]!)).toContain(`[link ${pub.base}/stall not read: it took longer than 300 ms]`);
    await waitFor(() => tg.texts(42).at(-1)?.startsWith(`ℹ️ I could not read ${pub.base}/stall: it took longer than 300 ms.`), 10_000);
  });
});
