import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Daemon } from '../../src/daemon/daemon.js';
import { kinds } from './kinds.js';
import { scaled } from './timing.js';

/** Collects log lines in memory, so tests can assert on them and the output stays quiet. */
export class LogSink extends Writable {
  readonly lines: string[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: () => void): void {
    this.lines.push(...String(chunk).split('\n').filter(Boolean));
    cb();
  }
  get text(): string {
    return this.lines.join('\n');
  }
  /** The JSON log lines, parsed: wait on these instead of sleeping. */
  entries(): Array<Record<string, unknown>> {
    return this.lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  }
}

export interface TestDaemon {
  daemon: Daemon;
  url: string;
  dir: string;
  configFile: string;
  logs: LogSink;
  /** Rewrites the config file (state_dir and listen are kept). */
  rewrite(body: string): void;
  /** Stops the daemon and removes its temp dir; a second call waits for the first. */
  stop(): Promise<void>;
}

/** The header every test config gets: its own state dir and a free port (and a 2 s grace unless `extra` sets one). */
export function header(dir: string, extra = '', httpExtra = ''): string {
  const grace = /^shutdown_grace_ms\s*=/m.test(extra) ? '' : 'shutdown_grace_ms = 2000\n';
  return `[daemon]\nstate_dir = "${join(dir, 'state')}"\n${grace}${extra}\n[http]\nlisten = "127.0.0.1:0"\n${httpExtra}\n`;
}

/** Starts an in-process daemon on a temp dir with `body` after the generated header. */
export async function startDaemon(body: string, env: NodeJS.ProcessEnv = {}, daemonExtra = '', httpExtra = ''): Promise<TestDaemon> {
  const dir = mkdtempSync(join(tmpdir(), 'channeld-test-'));
  const configFile = join(dir, 'daemon.config.toml');
  const write = (b: string) => writeFileSync(configFile, header(dir, daemonExtra, httpExtra) + b);
  write(body);
  const logs = new LogSink();
  const daemon = await Daemon.start({ configFile, kinds, env, logger: { destination: logs, level: 'debug', pretty: false } });
  const url = `http://127.0.0.1:${daemon.address.port}`;
  // Once only: a test may stop its daemon itself and the fixture's cleanup stops it again.
  let stopped: Promise<void> | undefined;
  return {
    daemon,
    url,
    dir,
    configFile,
    logs,
    rewrite: write,
    stop: () =>
      (stopped ??= (async () => {
        await daemon.stop();
        rmSync(dir, { recursive: true, force: true });
      })()),
  };
}

/**
 * Polls `fn` until it returns something truthy and returns that. `timeoutMs` is what an idle
 * machine needs; it is stretched by the test time scale (see timing.ts), so a busy machine
 * gets more time while a passing wait still returns as soon as its event happens.
 */
export async function waitFor<T>(fn: () => T | Promise<T>, timeoutMs = 5000, stepMs = 10): Promise<NonNullable<T>> {
  const limitMs = scaled(timeoutMs);
  const deadline = Date.now() + limitMs;
  for (;;) {
    const v = await fn();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`waitFor timed out after ${limitMs} ms`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}
