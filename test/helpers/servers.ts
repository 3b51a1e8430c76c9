import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { waitFor } from './daemon.js';

/** A port nobody listens on now, for servers that cannot be told port 0 (ngIRCd, Prosody). */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const { port } = s.address() as { port: number };
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

export interface Spawned {
  /** What the server wrote (stdout and stderr). */
  log: string[];
  /** SIGTERM, and waits for it to exit. */
  stop(): Promise<void>;
}

/** Runs a server in the foreground and resolves once its log contains `ready`. */
export async function spawnServer(command: string, args: string[], ready: string): Promise<Spawned> {
  const log: string[] = [];
  const child: ChildProcess = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (d: Buffer) => log.push(String(d)));
  child.stderr!.on('data', (d: Buffer) => log.push(String(d)));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  try {
    await waitFor(() => log.join('').includes(ready), 15_000);
  } catch (err) {
    child.kill('SIGKILL');
    throw new Error(`${command} did not start: ${log.join('').slice(-2000)}`, { cause: err });
  }
  return {
    log,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}
