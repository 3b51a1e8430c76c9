import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Element, xml } from '@xmpp/client';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { XmppAdapter } from '../../../channels/xmpp/adapter.js';
import { MAX_STANZA_BYTES, MAX_STANZA_DEPTH } from '../../../channels/xmpp/bounds.js';
import type { ChannelMessage } from '../../../src/contracts/message.js';
import { waitFor } from '../../helpers/daemon.js';
import { freePort, spawnServer } from '../../helpers/servers.js';
import { type Prosody, PROSODY, prosodyMissing, XmppUser } from '../../helpers/xmpp.js';

const PASSWORD = 'pw-bounds-1';

/**
 * A real Prosody as test/helpers/xmpp.ts starts it, but relaying stanzas up to 8 MiB
 * (c2s_stanza_size_limit; Prosody 0.12's own default is 256 KiB), so what acts on an
 * oversized stanza is channeld's bound, not the server's.
 */
async function startProsody(): Promise<Prosody> {
  const dir = mkdtempSync(join(tmpdir(), 'channeld-prosody-bounds-'));
  mkdirSync(join(dir, 'data'));
  mkdirSync(join(dir, 'certs'));
  const port = await freePort();
  const conf = join(dir, 'prosody.cfg.lua');
  writeFileSync(
    conf,
    `pidfile = "${dir}/prosody.pid"
data_path = "${dir}/data"
certificates = "${dir}/certs"
run_as_root = true
log = { { levels = { min = "info" }, to = "console" } }
interfaces = { "127.0.0.1" }
c2s_ports = { ${port} }
c2s_direct_tls_ports = { }
legacy_ssl_ports = { }
s2s_ports = { }
http_ports = { }
https_ports = { }
component_ports = { }
c2s_require_encryption = false
allow_unencrypted_plain_auth = true
authentication = "internal_plain"
storage = "internal"
c2s_stanza_size_limit = ${8 * 1024 * 1024}
modules_enabled = { "roster"; "saslauth"; "disco"; "ping"; "smacks"; "offline"; "posix" }
modules_disabled = { "tls"; "s2s" }
VirtualHost "localhost"
`,
  );
  const server = await spawnServer(PROSODY, ['-F', '--config', conf], `Activated service 'c2s' on [127.0.0.1]:${port}`);
  return {
    port,
    domain: 'localhost',
    muc: 'conference.localhost',
    log: server.log,
    register: (user, password) => void execFileSync('/usr/bin/prosodyctl', ['--config', conf, 'register', user, 'localhost', password], { stdio: 'ignore' }),
    stop: async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** `depth` elements, each inside the one before. */
const nested = (depth: number): Element => {
  let el = xml('leaf', { xmlns: 'urn:example:deep' });
  for (let i = 1; i < depth; i++) el = xml('x', { xmlns: 'urn:example:deep' }, el);
  return el;
};

describe.skipIf(prosodyMissing !== undefined)(`XMPP stanza bounds against a real Prosody${prosodyMissing ? ` (skipped: ${prosodyMissing})` : ''}`, () => {
  let server: Prosody;
  beforeAll(async () => {
    server = await startProsody();
  });
  afterAll(async () => {
    await server?.stop();
  });

  const user = async (local: string) => {
    server.register(local, PASSWORD);
    const u = new XmppUser(local, server, PASSWORD, false);
    onTestFinished(() => u.close());
    return u.start();
  };

  /** The channel's adapter listening as `local`, with what it delivers, logs and reports. */
  const bot = async (local: string) => {
    server.register(local, PASSWORD);
    const logs: Array<{ level: number; msg: string; reason?: string }> = [];
    const log = pino({ level: 'info' }, { write: (s: string) => void logs.push(JSON.parse(s)) });
    const adapter = new XmppAdapter({
      id: 'xmpp',
      local,
      domain: server.domain,
      password: PASSWORD,
      service: `xmpp://127.0.0.1:${server.port}`,
      rooms: [],
      connectTimeoutMs: 10_000,
      log,
    });
    const delivered: ChannelMessage[] = [];
    const reconnecting: string[] = [];
    let connected = 0;
    const stop = new AbortController();
    const listening = adapter.listen(
      async (m) => (delivered.push(m), true),
      stop.signal,
      () => connected++,
      (reason) => reconnecting.push(reason),
    );
    onTestFinished(async () => {
      stop.abort();
      await listening.catch(() => {});
    });
    await waitFor(() => connected === 1, 15_000);
    return {
      jid: `${local}@${server.domain}`,
      delivered,
      texts: () => delivered.map((m) => m.text),
      reconnecting,
      connections: () => connected,
      overruns: () => logs.filter((l) => l.msg.startsWith('XMPP stanza past the bounds')),
    };
  };

  const closedByUs = () => server.log.join('').match(/Session closed by remote with error: policy-violation[^\n]*/g) ?? [];

  it('a message past 1 MiB ends the connection with policy-violation and a logged reason; it reconnects, and messages before and after arrive', async () => {
    const alice = await user('alice1');
    const b = await bot('bot1');
    // Larger than one socket read (64 KiB) and than Prosody's default limit, well under ours.
    const large = 'l'.repeat(600 * 1024);
    alice.say(b.jid, 'before');
    await alice.x.send(xml('message', { to: b.jid, type: 'chat', id: 'large' }, xml('body', {}, large)));
    await waitFor(() => b.delivered.length === 2, 15_000);
    expect(b.texts()).toEqual(['before', large]);

    const policyErrors = closedByUs().length;
    const huge = 'h'.repeat(MAX_STANZA_BYTES + 256 * 1024);
    await alice.x.send(xml('message', { to: b.jid, type: 'chat', id: 'huge' }, xml('body', {}, huge)));
    await waitFor(() => b.connections() === 2 || b.delivered.length > 2, 20_000);
    expect(b.texts().map((t) => t.length)).toEqual([6, large.length]);
    await waitFor(() => b.connections() === 2, 20_000);
    expect(b.overruns()).toEqual([
      expect.objectContaining({ level: 40, reason: `XMPP: the server sent more than ${MAX_STANZA_BYTES} bytes of one <message> without ending it` }),
    ]);
    expect(b.reconnecting[0]).toContain(`more than ${MAX_STANZA_BYTES} bytes of one <message>`);
    // The server got the stream error, with the reason as its text.
    expect(closedByUs().slice(policyErrors)).toEqual([expect.stringContaining(`more than ${MAX_STANZA_BYTES} bytes`)]);

    alice.say(b.jid, 'after');
    await waitFor(() => b.texts().includes('after'), 15_000);
    // The oversized stanza was acknowledged as handled: the server neither kept it offline
    // nor gave it again, so there was no second overrun and no third connection.
    expect(b.texts()).toEqual(['before', large, 'after']);
    expect(b.overruns()).toHaveLength(1);
    expect(b.connections()).toBe(2);
  });

  it(`a message nesting elements deeper than ${MAX_STANZA_DEPTH} levels ends the connection the same way`, async () => {
    const bea = await user('bea1');
    const b = await bot('bot2');
    // At the bound: delivered.
    await bea.x.send(xml('message', { to: b.jid, type: 'chat', id: 'ok' }, xml('body', {}, 'at the bound'), nested(MAX_STANZA_DEPTH - 1)));
    await waitFor(() => b.delivered.length === 1, 15_000);

    await bea.x.send(xml('message', { to: b.jid, type: 'chat', id: 'deep' }, xml('body', {}, 'too deep'), nested(MAX_STANZA_DEPTH * 2)));
    await waitFor(() => b.connections() === 2 || b.delivered.length > 1, 20_000);
    expect(b.texts()).toEqual(['at the bound']);
    expect(b.overruns()).toEqual([expect.objectContaining({ reason: `XMPP: a <message> nests elements deeper than ${MAX_STANZA_DEPTH} levels` })]);

    bea.say(b.jid, 'after');
    await waitFor(() => b.texts().includes('after'), 15_000);
    expect(b.texts()).toEqual(['at the bound', 'after']);
    expect(b.connections()).toBe(2);
  });
});
