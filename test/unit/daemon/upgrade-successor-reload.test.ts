import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/load.js';
import { LiveConfig } from '../../../src/daemon/config-service.js';
import { Reloader } from '../../../src/daemon/reload.js';
import { ChannelTable, defineComponent, serviceNames, type Services } from '../../../src/daemon/services.js';
import { Upgrades } from '../../../src/daemon/upgrade/service.js';
import { SUCCESSOR_ENV } from '../../../src/daemon/upgrade/successor.js';
import { Kernel } from '../../../src/kernel/kernel.js';
import { createLogger } from '../../../src/observe/logger.js';
import { Metrics } from '../../../src/observe/metrics.js';
import { LiveUsage } from '../../../src/workspace/live-usage.js';
import { LogSink, waitFor } from '../../helpers/daemon.js';
import { kinds } from '../../helpers/kinds.js';
import { linkedSuccessor } from '../../helpers/upgrade.js';

/**
 * The new process of an upgrade as a reload sees it: the Reloader on a kernel with the
 * services a reload uses, the `upgrade` one linked to an old process the test speaks for
 * over an in-memory channel. The config has no channel and no agent, so an applied reload
 * touches nothing but the config.
 */
function newProcess(dir: string, linked = true) {
  const file = join(dir, 'daemon.config.toml');
  const write = (level: string) => writeFileSync(file, `[daemon]\nstate_dir = "${join(dir, 'state')}"\nlog_level = "${level}"\n`);
  write('debug');
  // Its own disconnect closes the channel, as a real one does.
  const { successor, sent, fromOld } = linkedSuccessor((link) => link.gone());
  const sink = new LogSink();
  const log = createLogger({ level: 'debug', destination: sink, pretty: false });
  const upgrades = new Upgrades(
    {
      log,
      timeoutMs: () => 1000,
      cluster: false,
      http: { listeningFd: () => undefined, stopAccepting: () => {}, drained: async () => {} },
      dispatcher: { freeze: () => [], deferTurns: () => {}, resumeTurns: () => 0, trackAdmissions: () => {}, recoverUnheld: () => 0 },
      storage: { flush: () => {}, status: () => ({ pending_writes: 0 }) },
      inbox: { unfinished: () => [] },
      reloading: () => false,
    },
    successor,
  );
  const kernel = new Kernel<Services>({ services: serviceNames });
  const live = new LiveConfig(loadConfig(file, kinds, {}), {});
  const parts = defineComponent({
    name: 'reload-parts',
    provides: ['config', 'logger', 'metrics', 'channels', 'workspaces'],
    start: (ctx) => {
      ctx.provide('config', live);
      ctx.provide('logger', log);
      ctx.provide('metrics', new Metrics(false));
      ctx.provide('channels', new ChannelTable());
      ctx.provide('workspaces', {
        byName: new Map(),
        build: () => {
          throw new Error('no agent');
        },
        live: new LiveUsage(() => ({})),
      });
    },
  });
  const upgrade = defineComponent({ name: 'upgrade', provides: ['upgrade'], start: (ctx) => ctx.provide('upgrade', upgrades) });
  return {
    reloader: new Reloader(kernel),
    start: () => kernel.load(parts, ...(linked ? [upgrade] : [])),
    stop: () => kernel.stop(),
    upgrades,
    sink,
    sent,
    fromOld,
    write,
  };
}

describe('upgrade: a reload in the new process', () => {
  const cleanup: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
  });

  function setup(linked = true) {
    const dir = mkdtempSync(join(tmpdir(), 'channeld-upgrade-successor-reload-'));
    const p = newProcess(dir, linked);
    cleanup.push(async () => {
      await p.stop();
      rmSync(dir, { recursive: true, force: true });
    });
    return p;
  }

  // The new process served SIGHUP and `channeld reload` while the old one was still handing
  // it listeners and their state: a reload could restart a channel whose listener was on its
  // way, or apply a config the old process (still finishing turns) never had.
  it('is refused (coded, logged) until its hand-over finished: before it is ready and while the old process still runs turns; applies after', async () => {
    const p = setup();
    await p.start();
    const refusedNow = async (why: RegExp) => {
      const r = await p.reloader.reload();
      expect(r).toMatchObject({ ok: false, generation: 1 });
      expect(r.errors).toHaveLength(1);
      expect(r.errors[0]).toMatch(why);
      expect(r.errors[0]).toMatch(/an upgrade is already under way/);
    };
    p.write('info');
    expect(p.upgrades.successorPhase).toBe('handingOver');
    await refusedNow(/still handing over to it.*reload once the upgrade has finished/);

    const ready = p.upgrades.ready();
    await waitFor(() => p.sent.some((m) => m.t === 'ready'));
    p.fromOld({ t: 'frozen', busy: ['tg:42'] });
    await waitFor(() => p.upgrades.tookOver);
    // It serves new conversations now, but the old process still runs tg:42's turn.
    await refusedNow(/still handing over to it/);
    await waitFor(() => p.sink.entries().filter((e) => e.reload === 'refused').length === 2);

    p.fromOld({ t: 'done' });
    await ready;
    expect(p.upgrades.successorPhase).toBe('idle');
    expect(await p.reloader.reload()).toMatchObject({ ok: true, generation: 2, errors: [] });
  });

  // After `abort` the old process serves on and stops this one: a reload applied here would
  // say ok for a config the process serving never loaded.
  it('is refused once the upgrade failed, until this process has stopped', async () => {
    const p = setup();
    await p.start();
    p.fromOld({ t: 'abort' });
    expect(p.upgrades.successorPhase).toBe('failed');
    const r = await p.reloader.reload();
    expect(r).toMatchObject({ ok: false, generation: 1 });
    expect(r.errors[0]).toMatch(/upgrade that failed.*reaches the old process/);
  });

  // Its HTTP server, and with it the reload action, serves before the upgrade service starts.
  it('is refused before the upgrade service started, in a process an upgrade started', async () => {
    const p = setup(false);
    await p.start();
    const before = process.env[SUCCESSOR_ENV];
    process.env[SUCCESSOR_ENV] = '1';
    try {
      const r = await p.reloader.reload();
      expect(r).toMatchObject({ ok: false, generation: 1 });
      expect(r.errors[0]).toMatch(/still handing over to it/);
    } finally {
      if (before === undefined) delete process.env[SUCCESSOR_ENV];
      else process.env[SUCCESSOR_ENV] = before;
    }
    expect(await p.reloader.reload()).toMatchObject({ ok: true, generation: 2 });
  });
});
