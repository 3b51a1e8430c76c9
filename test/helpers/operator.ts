import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import { scaled } from './timing.js';

/** The built command line, as an installed `channeld` runs it. */
export const channeldBin = join(import.meta.dirname, '../../dist/bin/channeld.js');

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `channeld ARGS` as a real process in `cwd` with only PATH and `env`; never rejects. */
export function runCli(args: string[], cwd: string, env: NodeJS.ProcessEnv = {}, bin = channeldBin): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [bin, ...args], { cwd, env: { PATH: process.env.PATH, ...env }, timeout: scaled(60_000) }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** A temp directory removed when the test finishes. */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), `channeld-${prefix}-`));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * An operator's config in its own folder: a RELATIVE state_dir (resolved against the file),
 * a free port, an admin token variable and one web chat channel, then `extra`.
 */
export function operatorConfig(dir: string, extra = '', listen = '127.0.0.1:0'): string {
  const file = join(dir, 'daemon.config.toml');
  writeFileSync(
    file,
    `[daemon]\nstate_dir = "state"\nshutdown_grace_ms = 2000\n\n[http]\nlisten = "${listen}"\nadmin_token_env = "ADMIN"\n\n[agent]\nprovider = "echo"\n\n[[channels]]\nid = "web"\ntype = "webchat"\n${extra}`,
  );
  return file;
}
