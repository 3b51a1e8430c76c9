import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { client, type Element, xml, type XmppClient } from '@xmpp/client';
import pino from 'pino';
import { onTestFinished } from 'vitest';
import { XmppAdapter } from '../../channels/xmpp/adapter.js';
import { waitFor } from './daemon.js';
import { freePort, spawnServer } from './servers.js';

/** Debian's Prosody; the XMPP tests skip with this reason where it is not installed (CI installs it). */
export const PROSODY = '/usr/bin/prosody';
export const prosodyMissing = existsSync(PROSODY) && existsSync('/usr/bin/prosodyctl') ? undefined : `${PROSODY} is not installed (apt-get install prosody)`;

export interface Prosody {
  port: number;
  domain: string;
  muc: string;
  log: string[];
  /** Registers an account with prosodyctl against this instance's own config and data. */
  register(user: string, password: string): void;
  /** Runs Lua in the server (its admin shell, `prosodyctl shell`; started with `shell: true`); what it printed. */
  shell(lua: string): string;
  stop(): Promise<void>;
}

/**
 * A real Prosody on 127.0.0.1 (no TLS, no s2s), its config and data in a temp dir, a MUC service
 * with non-anonymous rooms. `stanzaSizeLimitBytes` sets c2s_stanza_size_limit (Prosody 0.12's own
 * default is 256 KiB), so a test of channeld's own stanza bound can have Prosody relay larger ones.
 * `mucMaxRooms` sets the MUC service's muc_max_rooms (past it, a new room is refused with the
 * temporary error resource-constraint, type wait); `shell` enables the admin shell.
 */
export async function startProsody(o: { stanzaSizeLimitBytes?: number; mucMaxRooms?: number; shell?: boolean } = {}): Promise<Prosody> {
  const dir = mkdtempSync(join(tmpdir(), 'channeld-prosody-'));
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
${o.stanzaSizeLimitBytes !== undefined ? `c2s_stanza_size_limit = ${o.stanzaSizeLimitBytes}\n` : ''}modules_enabled = { "roster"; "saslauth"; "disco"; "ping"; "smacks"; "offline"; "posix"${o.shell ? '; "admin_shell"; "admin_socket"' : ''} }
modules_disabled = { "tls"; "s2s" }
VirtualHost "localhost"
Component "conference.localhost" "muc"
  muc_room_locking = false
  muc_room_default_public_jids = true
${o.mucMaxRooms !== undefined ? `  muc_max_rooms = ${o.mucMaxRooms}\n` : ''}`,
  );
  const server = await spawnServer(PROSODY, ['-F', '--config', conf], `Activated service 'c2s' on [127.0.0.1]:${port}`);
  return {
    port,
    domain: 'localhost',
    muc: 'conference.localhost',
    log: server.log,
    register: (user, password) => void execFileSync('/usr/bin/prosodyctl', ['--config', conf, 'register', user, 'localhost', password], { stdio: 'ignore' }),
    // ">" runs the line as Lua in the server's global environment.
    shell: (lua) => execFileSync('/usr/bin/prosodyctl', ['--config', conf, 'shell', `> ${lua}`], { encoding: 'utf8', timeout: 10_000 }),
    stop: async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface Received {
  from: string;
  type: string;
  id: string;
  body: string;
  /** The id a Last Message Correction replaces. */
  replaces: string | undefined;
  composing: boolean;
}

/** A person on XMPP (@xmpp/client, as the bot): says whether their client supports corrections, records what arrives. */
export class XmppUser {
  readonly received: Received[] = [];
  readonly stanzas: Element[] = [];
  readonly x: XmppClient;

  constructor(
    readonly local: string,
    prosody: Prosody,
    password: string,
    corrections: boolean,
  ) {
    this.x = client({ service: `xmpp://127.0.0.1:${prosody.port}`, domain: prosody.domain, username: local, password, resource: 'phone' });
    this.x.reconnect.stop();
    this.x.on('error', () => {});
    this.x.iqCallee.get('http://jabber.org/protocol/disco#info', 'query', () =>
      xml(
        'query',
        { xmlns: 'http://jabber.org/protocol/disco#info' },
        xml('identity', { category: 'client', type: 'phone' }),
        corrections ? xml('feature', { var: 'urn:xmpp:message-correct:0' }) : undefined,
      ),
    );
    this.x.on('stanza', (st: Element) => {
      this.stanzas.push(st);
      if (!st.is('message')) return;
      this.received.push({
        from: st.attrs.from ?? '',
        type: st.attrs.type ?? 'normal',
        id: st.attrs.id ?? '',
        body: st.getChildText('body') ?? '',
        replaces: st.getChild('replace', 'urn:xmpp:message-correct:0')?.attrs.id,
        composing: st.getChild('composing', 'http://jabber.org/protocol/chatstates') !== undefined,
      });
    });
  }

  get jid(): string {
    return `${this.local}@localhost`;
  }

  async start(): Promise<this> {
    await this.x.start();
    // Nothing goes out before stream management is enabled (see channels/xmpp/adapter.ts).
    await waitFor(() => this.x.streamManagement.enabled, 10_000);
    await this.x.send(xml('presence'));
    return this;
  }

  say(to: string, body: string, type: 'chat' | 'groupchat' = 'chat'): void {
    void this.x.send(xml('message', { to, type, id: `m-${Math.random().toString(36).slice(2)}` }, xml('body', {}, body)));
  }

  async join(room: string, nick: string): Promise<void> {
    await this.x.send(xml('presence', { to: `${room}/${nick}` }, xml('x', { xmlns: 'http://jabber.org/protocol/muc' }, xml('history', { maxstanzas: '0' }))));
    await waitFor(() => this.stanzas.some((s) => s.is('presence') && s.attrs.from === `${room}/${nick}`), 10_000);
  }

  /** Messages with a body from `from` (a bare JID, or a room JID for groupchat), corrections included. */
  from(from: string): Received[] {
    return this.received.filter((r) => r.body && r.from.split('/')[0] === from);
  }

  /** What each message shows now: the last correction of each, in the order first sent. */
  shown(from: string): string[] {
    const out = new Map<string, string>();
    for (const r of this.from(from)) {
      if (r.replaces && out.has(r.replaces)) out.set(r.replaces, r.body);
      else out.set(r.id, r.body);
    }
    return [...out.values()];
  }

  async close(): Promise<void> {
    await this.x.stop().catch(() => {});
  }
}

/** A person on `server`: `local` registered with `password` and online (a client without corrections), closed when the test finishes. */
export async function xmppUserOn(server: Prosody, local: string, password: string): Promise<XmppUser> {
  server.register(local, password);
  const u = new XmppUser(local, server, password, false);
  onTestFinished(() => u.close());
  return u.start();
}

/**
 * Channel "xmpp"'s adapter as `local` on `server` (registered here with `password`), not yet
 * listening: in `rooms` with nick "helper", connecting through `port` (a gate in front of the
 * server) where given; each line it logs at info and up is parsed into `logs`.
 */
export function xmppAdapterOn(
  server: Prosody,
  local: string,
  password: string,
  logs: unknown[],
  o: { rooms?: string[]; port?: number | undefined } = {},
): XmppAdapter {
  server.register(local, password);
  return new XmppAdapter({
    id: 'xmpp',
    local,
    domain: server.domain,
    password,
    service: `xmpp://127.0.0.1:${o.port ?? server.port}`,
    rooms: (o.rooms ?? []).map((jid) => ({ jid, nick: 'helper' })),
    connectTimeoutMs: 10_000,
    log: pino({ level: 'info' }, { write: (s: string) => void logs.push(JSON.parse(s)) }),
  });
}
