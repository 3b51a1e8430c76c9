import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeDiscord } from '../fakes/discord/server.js';
import { FakeSlack } from '../fakes/slack/server.js';
import { FakeTelegram } from '../fakes/telegram/server.js';
import { DaemonProcess } from '../helpers/process.js';

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

  /** Writes the four-channel config; `tgExtra` is appended to the Telegram channel (reload tests change it). */
  write(o: { port?: number; echoDelayMs?: number; tgExtra?: string; streamMode?: 'partial' | 'final'; agent?: string; maxInFlight?: number; only?: 'webchat' } = {}): void {
    const common = `allow_from = ["*"]\nstream_mode = "${o.streamMode ?? 'final'}"\n`;
    const head =
      `[daemon]\nstate_dir = "${join(this.dir, 'state')}"\nlog_level = "${process.env.FLEET_LOG_LEVEL ?? 'warn'}"\n\n[http]\nlisten = "127.0.0.1:${o.port ?? 0}"\n\n[limits]\nmax_in_flight = ${o.maxInFlight ?? 64}\nmax_queued = 100000\n\n` +
      (o.agent ?? `[agent]\nprovider = "echo"\necho_delay_ms = ${o.echoDelayMs ?? 0}\n`) +
      `\n[[channels]]\nid = "web"\ntype = "webchat"\n\n`;
    // `only: 'webchat'` is the embedded default's shape: no platform SDK is loaded at all.
    const platforms =
      o.only === 'webchat'
        ? ''
        : `[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG"\napi_root = "${this.tg.url}"\nnative_drafts = false\n${common}${o.tgExtra ?? ''}\n` +
          `[[channels]]\nid = "dc"\ntype = "discord"\ntoken_env = "DC"\nrest_api = "${this.dc.restApi}"\n${common}\n` +
          `[[channels]]\nid = "sl"\ntype = "slack"\nbot_token_env = "SL_BOT"\napp_token_env = "SL_APP"\napi_url = "${this.sl.apiUrl}"\nnative_stream = false\n${common}`;
    writeFileSync(this.configFile, head + platforms);
  }

  spawn(): DaemonProcess {
    return new DaemonProcess(this.configFile, this.env);
  }

  async close(): Promise<void> {
    await Promise.all([this.tg.close(), this.dc.close(), this.sl.close()]);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The bare baseline: the same three SDKs connected to these fakes, answering /readyz on `port`. */
export function spawnBareSdkBot(fleet: Fleet, port: number): { child: ChildProcess; exited: Promise<unknown> } {
  const child = spawn(process.execPath, [join(import.meta.dirname, 'bare/sdk-bot.mjs')], {
    env: { PATH: process.env.PATH, PORT: String(port), TG: fleet.tg.token, API_ROOT: fleet.tg.url, DC: fleet.dc.token, REST_API: fleet.dc.restApi, SL_APP: fleet.sl.appToken, SLACK_API: fleet.sl.apiUrl },
    stdio: 'ignore',
  });
  return { child, exited: new Promise((r) => child.once('exit', r)) };
}

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
