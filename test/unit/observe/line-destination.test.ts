import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../helpers/daemon.js';
import { scaled } from '../../helpers/timing.js';

const src = join(import.meta.dirname, '../../../src/observe');

interface Child {
  /** Everything read from its stdout so far. */
  out: () => string;
  /** Everything read from its stderr so far: the script's own progress notes. */
  err: () => string;
  /** Stops reading its stdout: the pipe fills and the child's writes would block. */
  stall: () => void;
  resume: () => void;
  /** Closes the read end of its stdout: the child's next write fails with EPIPE. */
  hangUp: () => void;
  /** Sends a line to its stdin (the scripts wait for one before they go on). */
  tell: (line: string) => void;
  exited: Promise<number | null>;
}

/**
 * A node process running `body` as an ES module with `lineDestination` and `stdoutDestination`
 * imported (and `createLogger`, unless `plain`), its stdout a real pipe to this process, as
 * the daemon's is to journald or a supervisor. `next()` in the body resolves on the next line
 * the test tells it. A `plain` child runs in node itself, as the bundle does: tsx's loader
 * would already have made stdout non-blocking.
 */
function child(body: string, { plain = false } = {}): Child {
  const script = [
    plain ? '' : `import { createLogger } from ${JSON.stringify(join(src, 'logger.ts'))};`,
    `import { lineDestination, stdoutDestination } from ${JSON.stringify(join(src, 'line-destination.ts'))};`,
    `import { createInterface } from 'node:readline';`,
    `const told = createInterface({ input: process.stdin })[Symbol.asyncIterator]();`,
    `const next = async () => (await told.next()).value;`,
    `const note = (text) => process.stderr.write(text + '\\n');`,
    body,
  ].join('\n');
  const p = spawn(process.execPath, [...(plain ? [] : ['--import', 'tsx']), '--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  p.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  p.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  // The pipe the test hangs up on reports EPIPE to the child, not to this side.
  p.stdout.on('error', () => {});
  p.stdin.on('error', () => {});
  const handle = { kill: () => p.kill('SIGKILL') };
  running.add(handle);
  const exited = new Promise<number | null>((resolve) =>
    p.on('exit', (code) => {
      running.delete(handle);
      resolve(code);
    }),
  );
  return {
    out: () => out,
    err: () => err,
    stall: () => p.stdout.pause(),
    resume: () => p.stdout.resume(),
    hangUp: () => p.stdout.destroy(),
    tell: (line) => p.stdin.write(`${line}\n`),
    exited,
  };
}

/** Children still running when a test ends (it failed): killed, not left blocked on a full pipe. */
const running = new Set<{ kill: () => void }>();
afterEach(() => {
  for (const p of running) p.kill();
  running.clear();
});

const lines = (text: string): string[] => text.split('\n').filter((l) => l !== '');
/** The `key` field of every JSON line in `text` that has one, in order. */
const numbers = (text: string, key = 'n'): number[] =>
  lines(text)
    .map((l) => (JSON.parse(l) as Record<string, number | undefined>)[key])
    .filter((v) => v !== undefined);

/** Stops reading the child's stdout, tells it to go, and waits for the note on its stderr that `note` matches. */
const stalledUntil = (c: Child, note: RegExp): Promise<RegExpExecArray> => {
  c.stall();
  c.tell('go');
  return waitFor(() => note.exec(c.err()), 30_000);
};
/** Reads the child's stdout again and tells it `last`; once it has exited 0, the numbers of the lines it wrote. */
const resumedToExit = async (c: Child, last = 'exit'): Promise<number[]> => {
  c.resume();
  c.tell(last);
  expect(await c.exited).toBe(0);
  return numbers(c.out());
};

describe('log lines on stdout (lineDestination)', () => {
  it('a lone line reaches stdout while the process goes on running, without any later line or exit', async () => {
    const c = child(`const log = createLogger({ level: 'info' }); log.info('lone line'); await next(); process.exit(0);`);
    await waitFor(() => c.out().includes('lone line'), 10_000);
    c.tell('exit');
    expect(await c.exited).toBe(0);
  });

  it('every line logged before an exit is written, whole and in order, also those of the exiting turn', async () => {
    const c = child(`
      const log = createLogger({ level: 'info' });
      for (let i = 0; i < 300; i++) log.info({ i }, 'earlier turn');
      await new Promise((r) => setTimeout(r, 0));
      for (let i = 300; i < 600; i++) log.info({ i }, 'exiting turn');
      process.exit(0);`);
    expect(await c.exited).toBe(0);
    const seen = numbers(c.out(), 'i');
    expect(seen).toEqual(Array.from({ length: 600 }, (_, i) => i));
  });

  it('a stdout that stops reading never blocks the process: the lines wait, and arrive whole and in order once it reads again', async () => {
    // 4 MiB of lines, far more than a pipe holds (64 KiB): a blocking write would stop the
    // child before its note, and the test would time out.
    const c = child(`
      const log = createLogger({ level: 'info' });
      await next();
      const pad = 'x'.repeat(400);
      for (let turn = 0; turn < 100; turn++) {
        for (let i = 0; i < 100; i++) log.info({ n: turn * 100 + i, pad }, 'line');
        await new Promise((r) => setTimeout(r, 1));
      }
      note('logged');
      await next();
      process.exit(0);`);
    await stalledUntil(c, /logged/);
    expect(c.out().length).toBeLessThan(4 * 2 ** 20);
    c.resume();
    await waitFor(() => lines(c.out()).length === 10_000, 30_000);
    c.tell('exit');
    expect(await c.exited).toBe(0);
    const seen = numbers(c.out());
    expect(seen).toEqual(Array.from({ length: 10_000 }, (_, i) => i));
  });

  it('stdoutDestination: in a process where nothing else made stdout non-blocking, a stalled pipe does not stop it', async () => {
    const c = child(
      `
      const out = stdoutDestination();
      await next();
      for (let turn = 0; turn < 20; turn++) {
        for (let n = turn * 100; n < turn * 100 + 100; n++) out.write(JSON.stringify({ n, pad: 'w'.repeat(500) }) + '\\n');
        await new Promise((r) => setTimeout(r, 1));
      }
      note('logged');
      await next();
      process.exit(0);`,
      { plain: true },
    );
    await stalledUntil(c, /logged/);
    expect(await resumedToExit(c)).toEqual(Array.from({ length: 2000 }, (_, i) => i));
  });

  it('lines that meet a stdout already full (EAGAIN on their first write) are kept, not lost', async () => {
    // The pipe is filled to the byte first with lines of PIPE_BUF bytes, each written whole
    // or not at all, so the destination's first write gets EAGAIN, not a partial write.
    const c = child(
      `
      import { writeSync } from 'node:fs';
      const out = stdoutDestination();
      await next();
      const filler = JSON.stringify({ fill: 'f'.repeat(4096 - 12) }) + '\\n';
      let fillers = 0;
      for (;;) {
        try { writeSync(1, filler); fillers++; } catch (err) { if (err.code === 'EAGAIN') break; throw err; }
      }
      for (let n = 0; n < 50; n++) out.write(JSON.stringify({ n }) + '\\n');
      await new Promise((r) => setImmediate(r));
      note('fillers ' + fillers);
      await next();
      process.exit(0);`,
      { plain: true },
    );
    await stalledUntil(c, /fillers/);
    expect(await resumedToExit(c)).toEqual(Array.from({ length: 50 }, (_, i) => i));
  });

  it('lines past the waiting bound are dropped whole, never cut, and counted', async () => {
    const c = child(`
      const out = lineDestination({ fd: 1, maxWaitingBytes: 256 * 1024, retryMs: 5, exitWaitMs: 20_000 });
      await next();
      const pad = 'y'.repeat(1000);
      for (let n = 0; n < 2000; n++) out.write(JSON.stringify({ n, pad }) + '\\n');
      note('dropped ' + out.droppedLines);
      await next();
      out.flushSync();
      process.exit(0);`);
    const dropped = Number((await stalledUntil(c, /dropped (\d+)/))[1]);
    // 2 MB written against a 256 KiB bound and a 64 KiB pipe: most lines were dropped.
    expect(dropped).toBeGreaterThan(1000);
    const seen = await resumedToExit(c, 'flush');
    expect(seen.length + dropped).toBe(2000);
    // The lines kept are the first ones, in order: a dropped line is never one in the middle.
    expect(seen).toEqual(Array.from({ length: seen.length }, (_, i) => i));
  });

  it('an exit waits for a stalled stdout that starts reading again within exitWaitMs', async () => {
    const c = child(`
      const out = lineDestination({ fd: 1, maxWaitingBytes: 16 * 2 ** 20, retryMs: 5, exitWaitMs: ${scaled(20_000)} });
      process.once('exit', () => out.flushSync());
      await next();
      for (let n = 0; n < 2000; n++) out.write(JSON.stringify({ n, pad: 'z'.repeat(500) }) + '\\n');
      note('exiting');
      process.exit(0);`);
    await stalledUntil(c, /exiting/);
    c.resume();
    expect(await c.exited).toBe(0);
    expect(lines(c.out())).toHaveLength(2000);
  });

  it('a closed stdout (EPIPE) neither crashes the process nor stops it logging', async () => {
    const c = child(`
      const log = createLogger({ level: 'info' });
      log.info('before');
      await next();
      for (let turn = 0; turn < 20; turn++) {
        log.info({ turn }, 'after the hang-up');
        await new Promise((r) => setTimeout(r, 1));
      }
      note('still running');
      process.exit(0);`);
    await waitFor(() => c.out().includes('before'), 10_000);
    c.hangUp();
    c.tell('go');
    expect(await c.exited).toBe(0);
    expect(c.err()).toContain('still running');
  });
});
