import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import { scaled } from './timing.js';

const main = join(import.meta.dirname, '../../dist/bin/channeld.js');

/** The built daemon as a real child process, with its JSON log lines collected. */
export class DaemonProcess {
  readonly child: ChildProcess;
  readonly lines: Array<Record<string, unknown>> = [];
  readonly exited: Promise<number | null>;
  #buf = '';

  /** `entry` is the script to run: the built `channeld`, or a test entry with more kinds (with `--import tsx` in `nodeArgs`). */
  constructor(configFile: string, env: NodeJS.ProcessEnv = {}, nodeArgs: string[] = [], entry = main) {
    this.child = spawn(process.execPath, [...nodeArgs, entry, 'run', '--config', configFile], {
      env: { PATH: process.env.PATH, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout!.on('data', (d: Buffer) => this.#take(String(d)));
    this.child.stderr!.on('data', (d: Buffer) => this.#take(String(d)));
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)));
  }

  #take(text: string): void {
    this.#buf += text;
    const parts = this.#buf.split('\n');
    this.#buf = parts.pop()!;
    for (const p of parts) {
      try {
        this.lines.push(JSON.parse(p) as Record<string, unknown>);
      } catch {
        this.lines.push({ msg: p });
      }
    }
  }

  /** The daemon's base URL, from its "web chat:" or "ready" log line. */
  async url(timeoutMs = 15_000): Promise<string> {
    const deadline = Date.now() + scaled(timeoutMs);
    for (;;) {
      const line = this.lines.find((l) => typeof l.url === 'string');
      if (line) return new URL(line.url as string).origin;
      if (Date.now() > deadline) throw new Error(`daemon did not print its URL within ${scaled(timeoutMs)} ms: ${JSON.stringify(this.lines)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  signal(sig: NodeJS.Signals): void {
    this.child.kill(sig);
  }
}

/** A DaemonProcess on `configFile`, killed (SIGKILL) when the test finishes if it still runs. */
export function withDaemonProcess(...args: ConstructorParameters<typeof DaemonProcess>): DaemonProcess {
  const p = new DaemonProcess(...args);
  onTestFinished(() => void p.child.kill('SIGKILL'));
  return p;
}

/**
 * Writes `<dir>/daemon.config.toml` for a daemon process: its state in `<dir>/state`, `daemon`
 * (more `[daemon]` keys), a free port, then `body`. Returns the file.
 */
export function writeProcessConfig(dir: string, body: string, daemon = ''): string {
  const file = join(dir, 'daemon.config.toml');
  writeFileSync(file, `[daemon]\nstate_dir = "${join(dir, 'state')}"\n${daemon}[http]\nlisten = "127.0.0.1:0"\n${body}`);
  return file;
}
