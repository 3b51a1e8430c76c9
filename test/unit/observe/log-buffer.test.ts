import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../../helpers/daemon.js';

const logger = join(import.meta.dirname, '../../../src/observe/logger.ts');

/** A node process (tsx) that runs `body` with `log`, a logger writing to its stdout as the daemon's does; collects what it prints. */
function child(body: string): { out: () => string; exited: Promise<number | null>; kill: () => void } {
  const script = `import { createLogger } from ${JSON.stringify(logger)};\nconst log = createLogger({ level: 'info' });\n${body}`;
  const p = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  p.stdout.on('data', (d: Buffer) => (out += String(d)));
  const exited = new Promise<number | null>((r) => p.once('exit', r));
  return { out: () => out, exited, kill: () => p.kill('SIGTERM') };
}

describe('buffered log writes', () => {
  it('a lone line, far under the buffer size, still reaches stdout while the process runs', async () => {
    // The process stays up (a timer) and never flushes by itself: only the periodic flush can write the line.
    const c = child(`log.info('lone line'); setInterval(() => {}, 1000);`);
    try {
      await waitFor(() => c.out().includes('lone line'), 10_000);
    } finally {
      c.kill();
      await c.exited;
    }
  });

  it('every line buffered before an exit is written', async () => {
    const c = child(`for (let i = 0; i < 500; i++) log.info({ i }, 'line'); process.exit(0);`);
    expect(await c.exited).toBe(0);
    const lines = c.out().trim().split('\n');
    expect(lines).toHaveLength(500);
    expect(JSON.parse(lines.at(-1)!)).toMatchObject({ i: 499, msg: 'line' });
  });
});
