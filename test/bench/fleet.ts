import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { FakeDiscord } from '../fakes/discord/server.js';
import { FakeSlack } from '../fakes/slack/server.js';
import { FakeTelegram } from '../fakes/telegram/server.js';
import { DaemonProcess } from '../helpers/process.js';
import { CHECK_INTERVAL_MS, IDLE_QUIET_MS } from '../../src/observe/memory-trim.js';

/** The three platform fakes on 127.0.0.1, and a config for a daemon that connects to all of them plus a web chat. */
export class Fleet {
  readonly tg = new FakeTelegram();
  readonly dc = new FakeDiscord();
  readonly sl = new FakeSlack();
  readonly dir = mkdtempSync(join(tmpdir(), 'channeld-bench-'));
  readonly configFile = join(this.dir, 'daemon.config.toml');

  async start(): Promise<this> {
    await Promise.all([this.tg.start(), this.dc.start(), this.sl.start()]);
    return this;
  }

  get env(): NodeJS.ProcessEnv {
    return { TG: this.tg.token, DC: this.dc.token, SL_BOT: this.sl.botToken, SL_APP: this.sl.appToken };
  }

  /**
   * Writes the four-channel config; `tgExtra` is appended to the Telegram channel (reload tests
   * change it). Logs at info by default: the daemon listens on port 0 and its "web chat:" line
   * says where.
   */
  write(
    o: {
      port?: number;
      echoDelayMs?: number;
      tgExtra?: string;
      streamMode?: 'partial' | 'final';
      /** Telegram's native drafts (sendMessageDraft in private chats, the final a new message); off unless asked, as the floors edit. */
      nativeDrafts?: boolean;
      agent?: string;
      maxInFlight?: number;
      only?: 'webchat' | 'telegram';
      /** More `[limits]` keys, one a line. */
      limits?: string;
    } = {},
  ): void {
    const common = `allow_from = ["*"]\nstream_mode = "${o.streamMode ?? 'final'}"\n`;
    const head =
      `[daemon]\nstate_dir = "${join(this.dir, 'state')}"\nlog_level = "${process.env.FLEET_LOG_LEVEL ?? 'info'}"\n\n[http]\nlisten = "127.0.0.1:${o.port ?? 0}"\n\n[limits]\nmax_in_flight = ${o.maxInFlight ?? 64}\nmax_queued = 100000\n${o.limits ?? ''}\n` +
      (o.agent ?? `[agent]\nprovider = "echo"\necho_delay_ms = ${o.echoDelayMs ?? 0}\n`) +
      `\n[[channels]]\nid = "web"\ntype = "webchat"\n\n`;
    // `only: 'webchat'` is the embedded default's shape: no platform SDK is loaded at all.
    const telegram = `[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG"\napi_root = "${this.tg.url}"\nnative_drafts = ${o.nativeDrafts ?? false}\n${common}${o.tgExtra ?? ''}\n`;
    // `only: 'telegram'`: web chat and Telegram, the shape compared with single-platform bots.
    const platforms =
      o.only === 'webchat'
        ? ''
        : o.only === 'telegram'
          ? telegram
          : telegram +
            `[[channels]]\nid = "dc"\ntype = "discord"\ntoken_env = "DC"\nrest_api = "${this.dc.restApi}"\n${common}\n` +
            `[[channels]]\nid = "sl"\ntype = "slack"\nbot_token_env = "SL_BOT"\napp_token_env = "SL_APP"\napi_url = "${this.sl.apiUrl}"\nnative_stream = false\n${common}`;
    writeFileSync(this.configFile, head + platforms);
  }

  /**
   * The daemon as the systemd unit runs it: the same script, node flags and environment.
   * `nodeArgs` are added to the unit's flags; `script` (absolute, or relative to the repository) replaces its
   * script, e.g. dist/bin/channeld.js for the unbundled build; `unitFlags: false` leaves out the
   * unit's heap-sizing flags.
   */
  spawn(o: { nodeArgs?: string[]; script?: string; unitFlags?: boolean } = {}): DaemonProcess {
    const unit = serviceLaunch();
    const script = o.script ? (isAbsolute(o.script) ? o.script : join(import.meta.dirname, '../..', o.script)) : unit.script;
    // unitFlags: false runs without the unit's heap-sizing flags (V8's own sizing), to show
    // what they cost; the rest (--expose-gc, so the memory trimmer) stays as the unit has it.
    const flags = o.unitFlags === false ? unit.nodeArgs.filter((a) => !heapSizing.test(a)) : unit.nodeArgs;
    // The growth limit channeld sets itself (src/observe/v8-flags.ts) is heap sizing too.
    const env = o.unitFlags === false ? withoutV8Flags({ ...unit.env, ...this.env }, heapSizing) : { ...unit.env, ...this.env };
    return new DaemonProcess(this.configFile, env, [...flags, ...(o.nodeArgs ?? [])], script);
  }

  async close(): Promise<void> {
    await Promise.all([this.tg.close(), this.dc.close(), this.sl.close()]);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** `env` with the flags `drop` matches taken out of its CHANNELD_V8_FLAGS (the flags channeld sets itself). */
export function withoutV8Flags<E extends Record<string, string | undefined>>(env: E, drop: RegExp): E {
  if (env.CHANNELD_V8_FLAGS === undefined) return env;
  const kept = env.CHANNELD_V8_FLAGS.split(/\s+/).filter((a) => a && !drop.test(a));
  return { ...env, CHANNELD_V8_FLAGS: kept.join(' ') };
}

/** The unit's flags that size V8's heap, which `unitFlags: false` leaves out ("_" spelled as V8 and channeld take it too). */
const heapSizing = /^--(max[-_]semi[-_]space[-_]size|heap[-_]growing[-_]percent)(=|$)/;

/** The bare baseline: the same three SDKs connected to these fakes, answering /readyz on the port it prints. */
export function spawnBareSdkBot(fleet: Fleet): { child: ChildProcess; exited: Promise<unknown>; port: Promise<number> } {
  const child = spawn(process.execPath, [join(import.meta.dirname, 'bare/sdk-bot.mjs')], {
    env: {
      PATH: process.env.PATH,
      TG: fleet.tg.token,
      API_ROOT: fleet.tg.url,
      DC: fleet.dc.token,
      REST_API: fleet.dc.restApi,
      SL_APP: fleet.sl.appToken,
      SLACK_API: fleet.sl.apiUrl,
    },
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const exited = new Promise((r) => child.once('exit', r));
  const port = new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += String(d);
      const line = out.split('\n')[0];
      if (out.includes('\n')) resolve((JSON.parse(line!) as { port: number }).port);
    });
    void exited.then(() => reject(new Error('the bare SDK bot exited before it printed its port')));
  });
  port.catch(() => {});
  return { child, exited, port };
}

/**
 * How systemd/channeld.service starts node: the flags between the node binary and the script on
 * its ExecStart line, the script (under dist/ here), and its Environment= variables other than
 * the config path. The benches spawn the daemon the same way, so what they measure is what an
 * installed daemon does. To compare settings, BENCH_NODE_ARGS (space-separated) replaces the
 * flags, BENCH_SCRIPT the script (dist/bin/channeld.js: the unbundled build) and BENCH_ENV
 * the environment's variables.
 */
export function serviceLaunch(): { nodeArgs: string[]; script: string; env: Record<string, string> } {
  const root = join(import.meta.dirname, '../..');
  const unit = readFileSync(join(root, 'systemd/channeld.service'), 'utf8');
  const exec = /^ExecStart=\S+\s+(.*?)\s*\S*?\/(dist\/\S+\.js)\s/m.exec(unit);
  if (!exec) throw new Error('systemd/channeld.service: no ExecStart line running a script under dist/');
  const nodeArgs = process.env.BENCH_NODE_ARGS !== undefined ? process.env.BENCH_NODE_ARGS.split(' ').filter(Boolean) : exec[1]!.split(/\s+/).filter(Boolean);
  const script = join(root, process.env.BENCH_SCRIPT ?? exec[2]!);
  const env: Record<string, string> = {};
  // Environment=NAME=VALUE, or "NAME=VALUE" quoted when the value has spaces (CHANNELD_V8_FLAGS).
  for (const m of unit.matchAll(/^Environment=(?:(\w+)=(\S*)|"(\w+)=([^"]*)")$/gm)) {
    const [name, value] = m[1] ? [m[1], m[2]!] : [m[3]!, m[4]!];
    if (name !== 'CHANNELD_CONFIG') env[name] = value;
  }
  // BENCH_ENV ('NAME=VALUE ...', read at each launch) sets unit variables; 'NAME=' removes one;
  // a value with spaces is quoted: 'CHANNELD_V8_FLAGS="--heap-growing-percent=10 --expose-gc"'.
  // Every word is one of the two alternatives: NAME=VALUE, or anything else, which is refused.
  for (const m of (process.env.BENCH_ENV ?? '').matchAll(/(\w+)=(?:"([^"]*)"|(\S*))|(\S+)/g)) {
    if (m[4] !== undefined) throw new Error(`BENCH_ENV: "${m[4]}" is not NAME=VALUE`);
    const value = m[2] ?? m[3]!;
    if (value === '') delete env[m[1]!];
    else env[m[1]!] = value;
  }
  return { nodeArgs, script, env };
}

/**
 * Runs `run` (which launches the "before" build of a side-by-side script: ab.ts, ab-startup.ts,
 * burst-ab.ts) with AB_BEFORE_ENV as BENCH_ENV and AB_BEFORE_NODE_ARGS as BENCH_NODE_ARGS,
 * each when set, then restores both: a build from before a change of the unit's settings runs
 * as the unit ran it then (AB_BEFORE_NODE_ARGS="--max-semi-space-size=8 --heap-growing-percent=10
 * --expose-gc" for a build from before CHANNELD_V8_FLAGS).
 */
export async function asBefore<T>(run: () => Promise<T>): Promise<T> {
  const settings = { BENCH_ENV: process.env.AB_BEFORE_ENV, BENCH_NODE_ARGS: process.env.AB_BEFORE_NODE_ARGS };
  const kept = { BENCH_ENV: process.env.BENCH_ENV, BENCH_NODE_ARGS: process.env.BENCH_NODE_ARGS };
  const put = (name: keyof typeof kept, value: string | undefined) => {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  };
  for (const name of ['BENCH_ENV', 'BENCH_NODE_ARGS'] as const) if (settings[name] !== undefined) put(name, settings[name]);
  try {
    return await run();
  } finally {
    for (const name of ['BENCH_ENV', 'BENCH_NODE_ARGS'] as const) put(name, kept[name]);
  }
}

/**
 * How long after its last turn a daemon has surely made its idle memory trim: the trimmer's
 * quiet period, the check after it, and one more in case a check fired a little early.
 */
export const TRIMMED_AFTER_MS = IDLE_QUIET_MS + 3 * CHECK_INTERVAL_MS;

/** Resident set size of a process in MB, from /proc. */
export function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return kb / 1024;
}

/** CPU time (user + system) a process has used so far, in ms, from /proc (clock ticks of 10 ms). */
export function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start after the last ')'.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
}
