import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Daemon } from '../../src/daemon/daemon.js';
import { kinds } from '../helpers/kinds.js';
import { LogSink, waitFor } from '../helpers/daemon.js';

/** A small real filesystem, so "no room" is the kernel's ENOSPC, not a mock. */
function mountTmpfs(dir: string, size: string): string | undefined {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0755`, 'tmpfs', dir], { stdio: 'pipe' });
    return undefined;
  } catch (err) {
    return `cannot mount a tmpfs (${String((err as { stderr?: Buffer }).stderr ?? err).trim()}); the full-disk upload test needs root`;
  }
}

const storageOf = async (url: string) => ((await (await fetch(`${url}/status`)).json()) as { storage: { state: string; code: string | null } }).storage;
const metricsOf = async (url: string) => (await fetch(`${url}/metrics`)).text();
const upload = (url: string, bytes: Buffer, tab = 't1') =>
  fetch(`${url}/webchat/web/upload?tab=${tab}`, {
    method: 'POST',
    headers: { 'content-type': 'application/octet-stream', 'x-file-name': 'big.bin' },
    body: bytes,
  });

describe('web chat uploads count in the storage-fault model', () => {
  const cleanups: Array<() => void | Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function start(root: string, stateDir: string, webchat = '') {
    const configFile = join(root, 'daemon.config.toml');
    writeFileSync(
      configFile,
      `[daemon]\nstate_dir = "${stateDir}"\nshutdown_grace_ms = 2000\n\n[http]\nlisten = "127.0.0.1:0"\n\n[agent]\nprovider = "echo"\n\n[[channels]]\nid = "web"\ntype = "webchat"\n${webchat}`,
    );
    const logs = new LogSink();
    const daemon = await Daemon.start({ configFile, kinds, env: {}, logger: { destination: logs, level: 'debug', pretty: false } });
    cleanups.push(() => daemon.stop());
    return { logs, url: `http://127.0.0.1:${daemon.address.port}` };
  }

  it('an upload onto a full filesystem (a real tmpfs) is 507 and counts as a storage fault: degraded (logged, metric), then recovered once the database takes writes', async (ctx) => {
    const root = mkdtempSync(join(tmpdir(), 'channeld-upfull-'));
    cleanups.push(() => rmSync(root, { recursive: true, force: true }));
    // The database stays on the ordinary disk; only the uploads folder is a 256 KB tmpfs.
    const stateDir = join(root, 'state');
    const mnt = join(stateDir, 'uploads');
    mkdirSync(mnt, { recursive: true });
    const why = mountTmpfs(mnt, '256k');
    if (why) ctx.skip(`a real tmpfs cannot be mounted here: ${why}`);
    cleanups.push(() => {
      execFileSync('umount', ['-l', mnt]);
      rmdirSync(mnt);
    });
    const { logs, url } = await start(root, stateDir);
    expect(await storageOf(url)).toMatchObject({ state: 'ok' });

    const r = await upload(url, Buffer.alloc(1024 * 1024, 7));
    expect(r.status).toBe(507);
    expect(((await r.json()) as { error: string }).error).toContain('ENOSPC');
    expect(readdirSync(join(mnt, 'web'))).toEqual([]);

    // The daemon learned of it as of a failed database write: one log line with the code, the counter.
    await waitFor(() => logs.lines.some((l) => l.includes('storage degraded: ENOSPC')));
    expect(await metricsOf(url)).toMatch(/^channeld_storage_faults_total\{code="ENOSPC"\} 1$/m);
    // The database still takes writes, so the probe brings the health back by itself.
    await waitFor(async () => (await storageOf(url)).state === 'ok', 20_000);
    expect(await metricsOf(url)).toMatch(/^channeld_storage_degraded 0$/m);
    expect(logs.lines.filter((l) => l.includes('storage recovered')).length).toBe(1);
  });

  it('an upload refused by the quota is counted (code QUOTA) without degrading storage', async () => {
    const root = mkdtempSync(join(tmpdir(), 'channeld-upquota-'));
    cleanups.push(() => rmSync(root, { recursive: true, force: true }));
    const { logs, url } = await start(root, join(root, 'state'), 'upload_quota_bytes = 4000\n');
    expect((await upload(url, Buffer.alloc(1000, 1))).status).toBe(200);
    expect((await upload(url, Buffer.alloc(1000, 1))).status).toBe(413);
    expect(await metricsOf(url)).toMatch(/^channeld_storage_faults_total\{code="QUOTA"\} 1$/m);
    expect(logs.lines.some((l) => l.includes('storage quota is used up'))).toBe(true);
    expect(await storageOf(url)).toMatchObject({ state: 'ok' });
  });
});
