import Database from 'better-sqlite3';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, openSync, rmSync, rmdirSync, writeFileSync, writeSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Daemon } from '../../src/daemon/daemon.js';
import { kinds } from '../helpers/kinds.js';
import { LogSink, waitFor } from '../helpers/daemon.js';
import { ChatClient } from '../helpers/webchat-client.js';
import { HELD_REPLY } from '../../src/dispatch/dispatcher.js';
import { FakeTelegram } from '../fakes/telegram/server.js';
import { startDaemon } from '../helpers/daemon.js';

const body = `[agent]\nprovider = "echo"\necho_delay_ms = 80\n\n[[channels]]\nid = "web"\ntype = "webchat"\n`;

/** A small real filesystem, so "disk full" is the kernel's ENOSPC, not a mock. */
function mountTmpfs(dir: string, size: string): string | undefined {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0755`, 'tmpfs', dir], { stdio: 'pipe' });
    return undefined;
  } catch (err) {
    return `cannot mount a tmpfs (${String((err as { stderr?: Buffer }).stderr ?? err).trim()}); disk-full test needs root`;
  }
}

/** Fills the filesystem holding `file` until the kernel says ENOSPC. */
function fill(file: string): void {
  const fd = openSync(file, 'w');
  const chunk = Buffer.alloc(64 * 1024, 1);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    closeSync(fd);
  }
  // Bytes that still fit in the last partial block.
  const small = openSync(file, 'a');
  try {
    for (;;) writeSync(small, Buffer.alloc(512, 1));
  } catch {
    /* full */
  } finally {
    closeSync(small);
  }
}

async function json(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(url);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('storage faults: the daemon stays up, holds new messages, and recovers by itself', () => {
  const cleanups: Array<() => void | Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function start(stateDir: string, root: string) {
    const configFile = join(root, 'daemon.config.toml');
    writeFileSync(configFile, `[daemon]\nstate_dir = "${stateDir}"\nshutdown_grace_ms = 2000\n\n[http]\nlisten = "127.0.0.1:0"\n\n${body}`);
    const logs = new LogSink();
    const daemon = await Daemon.start({ configFile, kinds, env: {}, logger: { destination: logs, level: 'debug', pretty: false } });
    cleanups.push(() => daemon.stop());
    const url = `http://127.0.0.1:${daemon.address.port}`;
    const client = new ChatClient(url, 'tab-1');
    cleanups.push(() => client.close());
    await client.opened;
    return { daemon, logs, url, client };
  }

  it('disk full (a real tmpfs): the running turn is answered, a new message is held (one notice, no ack), /status, /readyz and the metrics show it, and it recovers and answers it', async (ctx) => {
    const root = mkdtempSync(join(tmpdir(), 'channeld-full-'));
    cleanups.push(() => rmSync(root, { recursive: true, force: true }));
    const mnt = join(root, 'mnt');
    mkdirSync(mnt);
    const why = mountTmpfs(mnt, '2m');
    if (why) {
      // The reason shows in the report beside the skipped test (no tmpfs without mount rights).
      ctx.skip(`a real tmpfs cannot be mounted here: ${why}`);
    }
    cleanups.push(() => {
      execFileSync('umount', ['-l', mnt]);
      rmdirSync(mnt);
    });
    const { daemon, logs, url, client } = await start(join(mnt, 'state'), root);
    client.send('warm up');
    await client.finals(1);

    // A turn is running when the disk fills up: its closing writes (state, session) fail.
    client.send('one two three four five six seven eight');
    await waitFor(() => client.replies().some((f) => f.text?.startsWith('one') && !f.final));
    const filler = join(mnt, 'filler');
    fill(filler);
    const finals = await client.finals(2, 20_000);
    expect(finals.map((f) => f.text)).toContain('one two three four five six seven eight');

    // A new message is held: no ack until it is stored, and one readable notice.
    const acksBefore = client.frames.filter((f) => f.type === 'ack').length;
    const big = 'x'.repeat(3000);
    client.send(`${big} held`, 'held-1');
    await waitFor(() => client.replies().some((f) => f.text === HELD_REPLY), 10_000);
    expect(client.frames.filter((f) => f.type === 'ack').length).toBe(acksBefore);
    expect(client.frames.some((f) => f.type === 'error')).toBe(false);

    const status = await json(`${url}/status`);
    expect(status.body.storage).toMatchObject({ state: 'degraded', code: 'SQLITE_FULL' });
    const ready = await json(`${url}/readyz`);
    expect(ready.status).toBe(503);
    expect(ready.body).toMatchObject({ storage: 'degraded', storage_code: 'SQLITE_FULL' });
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toMatch(/^channeld_storage_degraded 1$/m);
    expect(metrics).toMatch(/^channeld_storage_faults_total\{code="SQLITE_FULL"\} 1$/m);
    expect(metrics).toMatch(/^channeld_messages_held\{channel="web"\} 1$/m);
    expect((status.body.channels as Array<{ id: string; held: number }>).find((c) => c.id === 'web')?.held).toBe(1);

    // Room again: it recovers by itself, commits what waited, and takes messages again.
    rmSync(filler);
    await waitFor(async () => ((await json(`${url}/status`)).body.storage as { state: string }).state === 'ok', 20_000);
    expect((await json(`${url}/status`)).body.storage).toMatchObject({ state: 'ok', pending_writes: 0 });
    expect((await fetch(`${url}/readyz`)).status).toBe(200);
    expect(await (await fetch(`${url}/metrics`)).text()).toMatch(/^channeld_storage_degraded 0$/m);
    // The held message is stored (acked now) and answered.
    await waitFor(() => client.frames.some((f) => f.type === 'ack' && f.id === 'held-1'), 10_000);
    await waitFor(() => client.replies().some((f) => f.final && f.text === `${big} held`), 20_000);
    client.send('back again', 'after-1');
    await waitFor(() => client.frames.some((f) => f.type === 'ack' && f.id === 'after-1'), 10_000);
    await waitFor(() => client.replies().some((f) => f.final && f.text === 'back again'), 20_000);

    // One log line per state change, not one per failed write.
    const lines = logs.lines.map((l) => JSON.parse(l) as { msg: string });
    expect(lines.filter((l) => l.msg.startsWith('storage degraded')).length).toBe(1);
    expect(lines.filter((l) => l.msg.startsWith('storage recovered')).length).toBe(1);
    // Nothing was lost: the turn that ended while the disk was full is stored as done.
    const db = new Database(join(mnt, 'state', 'channeld.db'), { readonly: true });
    cleanups.push(() => void db.close());
    const states = () => db.prepare(`SELECT message_id, state FROM inbox ORDER BY id`).all() as Array<{ message_id: string; state: string }>;
    // The last turn's closing write rides the next group commit.
    await waitFor(() => states().every((s) => s.state === 'done'), 5_000);
    expect(states().map((s) => s.message_id)).toEqual(['tab-1:m1', 'tab-1:m2', 'tab-1:held-1', 'tab-1:after-1']);
    void daemon;
  }, 60_000);

  it('another process holds the write lock: the event loop stays free (/status answers with SQLITE_BUSY meanwhile) and the message is stored once the lock goes', async () => {
    const root = mkdtempSync(join(tmpdir(), 'channeld-lock-'));
    cleanups.push(() => rmSync(root, { recursive: true, force: true }));
    const { logs, url, client } = await start(join(root, 'state'), root);
    client.send('warm up');
    await client.finals(1);

    const other = new Database(join(root, 'state', 'channeld.db'));
    cleanups.push(() => void other.close());
    other.exec('BEGIN IMMEDIATE');
    let locked = true;
    cleanups.push(() => void (locked && other.exec('ROLLBACK')));
    client.send('while locked', 'locked-1');
    // While the lock is held, the daemon answers and reports why it waits.
    const status = await waitFor(async () => {
      const s = await json(`${url}/status`);
      return (s.body.storage as { code: string | null }).code === 'SQLITE_BUSY' ? s : undefined;
    }, 4_000);
    expect(status.body.storage).toMatchObject({ state: 'degraded' });
    const t0 = performance.now();
    const health = await fetch(`${url}/healthz`);
    const healthMs = performance.now() - t0;
    expect(health.status).toBe(200);
    expect(client.frames.some((f) => f.type === 'ack' && f.id === 'locked-1')).toBe(false);
    other.exec('ROLLBACK');
    locked = false;
    console.log(`/healthz answered in ${healthMs.toFixed(1)} ms while another process held the write lock`);

    await waitFor(() => client.frames.some((f) => f.type === 'ack' && f.id === 'locked-1'), 10_000);
    const finals = await client.finals(2, 10_000);
    expect(finals.map((f) => f.text)).toContain('while locked');
    await waitFor(async () => ((await json(`${url}/status`)).body.storage as { state: string }).state === 'ok', 10_000);
    expect(logs.lines.filter((l) => l.includes('storage recovered')).length).toBe(1);
  }, 30_000);

  it('Telegram polling: a message the store cannot take is held (one notice), not confirmed to Telegram, and answered once when the store is back', async () => {
    const tg = new FakeTelegram();
    await tg.start();
    cleanups.push(() => tg.close());
    const d = await startDaemon(
      `[agent]\nprovider = "echo"\necho_delay_ms = 0\n\n[[channels]]\nid = "tg"\ntype = "telegram"\ntoken_env = "TG_TOKEN"\napi_root = "${tg.url}"\nallow_from = ["*"]\nnative_drafts = false\n[channels.backoff]\ninitial_ms = 100\nmax_ms = 500\n`,
      { TG_TOKEN: tg.token },
    );
    cleanups.push(() => d.stop());
    await d.daemon.supervisor.firstAttempts();
    // Held longer than the notice waits (2 s): the conversation is told once.
    const other = new Database(join(d.dir, 'state', 'channeld.db'));
    cleanups.push(() => void other.close());
    other.exec('BEGIN IMMEDIATE');
    let locked = true;
    cleanups.push(() => void (locked && other.exec('ROLLBACK')));
    tg.dm('stored later');
    await waitFor(() => tg.texts(42).includes(HELD_REPLY), 20_000);
    // Not acknowledged: the offset did not move past it, so Telegram keeps it.
    expect(tg.pendingUpdates).toBe(1);
    expect(tg.texts(42)).not.toContain('stored later');
    other.exec('ROLLBACK');
    locked = false;
    await waitFor(() => tg.texts(42).includes('stored later'), 20_000);
    await waitFor(() => tg.pendingUpdates === 0, 10_000);
    expect(tg.texts(42).filter((t) => t === 'stored later')).toHaveLength(1);
    expect(tg.texts(42).filter((t) => t === HELD_REPLY)).toHaveLength(1);
  }, 60_000);
});
