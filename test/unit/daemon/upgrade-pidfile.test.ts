import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { pidFileComponent } from '../../../src/daemon/pidfile.js';
import { defineComponent, type Services } from '../../../src/daemon/services.js';
import { Kernel } from '../../../src/kernel/kernel.js';
import { runFiles } from '../../../src/util/run-files.js';
import { createLogger } from '../../../src/observe/logger.js';

describe('run files of a process started by an upgrade', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  /** The pidfile component over stand-in services: `upgrade` says whether this process was started by one and took over. */
  async function run(upgrade: { successor?: object; tookOver: boolean }, between?: (files: ReturnType<typeof runFiles>, recovered: () => void) => void) {
    const dir = mkdtempSync(join(tmpdir(), 'channeld-pidfile-'));
    dirs.push(dir);
    const files = runFiles(dir);
    // The old process's files, as it wrote them.
    writeFileSync(files.pid, '4242\n');
    writeFileSync(files.url, 'http://127.0.0.1:7000\n');
    writeFileSync(files.reload, '{"id":"4242-1"}\n');
    const listeners = new Set<() => void>();
    const kernel = new Kernel<Services>();
    const stand = defineComponent({
      name: 'stand-ins',
      provides: ['config', 'storage', 'http', 'upgrade', 'logger'],
      start: (ctx) => {
        ctx.provide('config', { config: { daemon: { state_dir: dir } } } as unknown as Services['config']);
        ctx.provide('storage', {} as Services['storage']);
        ctx.provide('http', { address: { address: '127.0.0.1', port: 7001 } } as unknown as Services['http']);
        ctx.provide('upgrade', { ...upgrade, onRecovered: (l: () => void) => (listeners.add(l), () => listeners.delete(l)) } as unknown as Services['upgrade']);
        ctx.provide('logger', createLogger({ level: 'silent' }));
      },
    });
    await kernel.load(stand, pidFileComponent);
    expect(readFileSync(files.pid, 'utf8').trim()).toBe(String(process.pid));
    between?.(files, () => {
      for (const l of listeners) l();
    });
    await kernel.stop();
    expect(listeners.size).toBe(0);
    return files;
  }

  // A failed upgrade stops its new process (SIGTERM): that process found its own pid in
  // channeld.pid and removed the files, though the old process serves on; the CLI then found
  // no daemon (and `channeld reload` could not signal it).
  it('a new process stopped before it took over gives the old process its files back', async () => {
    const files = await run({ successor: {}, tookOver: false });
    expect(readFileSync(files.pid, 'utf8')).toBe('4242\n');
    expect(readFileSync(files.url, 'utf8')).toBe('http://127.0.0.1:7000\n');
    expect(existsSync(files.reload)).toBe(true);
  });

  it('one that took over, or a daemon not started by an upgrade, removes them at its stop', async () => {
    for (const upgrade of [{ successor: {}, tookOver: true }, { tookOver: true }]) {
      const files = await run(upgrade);
      expect([files.pid, files.url, files.reload].filter((f) => existsSync(f))).toEqual([]);
    }
  });

  // A failed upgrade's new process SIGKILLed before it could put the files back (its stop
  // past KILL_AFTER_MS) left its own pid in channeld.pid: the CLI then found no daemon,
  // though this one served on.
  it('a daemon whose upgrade failed writes its files back once the new process is gone, if that one left its own', async () => {
    await run({ tookOver: true }, (files, recovered) => {
      writeFileSync(files.pid, '999999\n');
      writeFileSync(files.url, 'http://127.0.0.1:7999\n');
      recovered();
      expect(readFileSync(files.pid, 'utf8')).toBe(`${process.pid}\n`);
      expect(readFileSync(files.url, 'utf8')).toBe('http://127.0.0.1:7001\n');
    });
  });
});
