import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import { z } from 'zod';
import { loadConfig } from '../../../src/config/load.js';
import { ConfigError } from '../../../src/contracts/errors.js';
import type { PluginDefinition } from '../../../src/contracts/plugin-folder.js';
import type { Tool } from '../../../src/contracts/tools.js';
import { Extensions, type PluginFailure } from '../../../src/daemon/extensions.js';
import { definitionProblems, loadPluginFolders, type PluginFolder, pluginFolderComponent } from '../../../src/daemon/plugin-folders.js';
import { defineComponent, serviceNames, type Services } from '../../../src/daemon/services.js';
import { Kernel } from '../../../src/kernel/kernel.js';
import { createLogger } from '../../../src/observe/logger.js';
import { Runtime } from '../../../src/runtime/runtime.js';
import { ToolCalls } from '../../../src/tools/tool-calls.js';
import { LogSink } from '../../helpers/daemon.js';
import { withTempDir } from '../../helpers/fixtures.js';
import { kinds } from '../../helpers/kinds.js';

const LIGHTHOUSE = join(import.meta.dirname, '../../fixtures/plugins/lighthouse');

/**
 * A kernel running `folder` as the daemon does (its own component beside the `extensions` and
 * `logger` services), with one agent's runtime attached and every call going through ToolCalls,
 * the gate every tool call passes. Stopped when the test finishes.
 */
async function daemonWith(folder: PluginFolder) {
  const logs = new LogSink();
  const log = createLogger({ level: 'info', destination: logs, pretty: false });
  const failures: PluginFailure[] = [];
  const extensions = new Extensions((f) => failures.push(f));
  const kernel = new Kernel<Services>({ services: serviceNames });
  const base = defineComponent({
    name: 'base',
    provides: ['extensions', 'logger'],
    start: (ctx) => {
      ctx.provide('extensions', extensions);
      ctx.provide('logger', log);
    },
  });
  await kernel.load(base, pluginFolderComponent(folder));
  const runtime = new Runtime({
    runnerFor: () => {
      throw new Error('no model in these tests');
    },
  });
  const detach = extensions.attach(runtime, 'default');
  const calls = new ToolCalls({ log, agent: () => undefined });
  onTestFinished(async () => {
    detach();
    await kernel.stop();
  });
  const tool = (name: string, modes: string[] = []): Tool =>
    calls.wrap('default', runtime.tools.select({ modes: new Set(modes), features: new Set() }).find((t) => t.name === name)!);
  const warnings = () => logs.entries().filter((e) => e.level === 40);
  return { tool, failures, warnings };
}

/** A call's outcome as it stands now: still running, or what the caller (the model) reads. */
function watch(p: unknown): { state: 'running' | 'answered' | 'threw'; value?: unknown } {
  const seen: { state: 'running' | 'answered' | 'threw'; value?: unknown } = { state: 'running' };
  Promise.resolve(p).then(
    (value) => Object.assign(seen, { state: 'answered', value }),
    (value: unknown) => Object.assign(seen, { state: 'threw', value }),
  );
  return seen;
}

const ctx = () => ({ signal: new AbortController().signal, scope: 'web:c1', timeZone: 'UTC' });

describe("a plugin folder's tools are bounded in time", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('one that never settles ends at the default 60 s, a mode tool at its own timeout_ms: the model reads the error and a warning names tool and time', async () => {
    let ignored: AbortSignal | undefined;
    const tides: PluginDefinition = {
      name: 'tides',
      tools: [
        {
          name: 'hang',
          description: 'never answers and ignores its signal',
          input: z.object({}),
          run: (_input, c) => {
            ignored = c.signal;
            return new Promise(() => {});
          },
        },
      ],
      modes: [
        {
          name: 'night',
          description: 'after dark',
          setup: (api) => api.tool({ name: 'lantern', description: 'never lit', input: z.object({}), timeout_ms: 200, run: () => new Promise(() => {}) }),
        },
      ],
    };
    const d = await daemonWith({ configured: './tides', index: '/plugins/tides/index.mjs', definition: tides });
    vi.useFakeTimers();
    const hang = watch(d.tool('hang').run({}, ctx()));
    const lantern = watch(d.tool('lantern', ['night']).run({}, ctx()));

    await vi.advanceTimersByTimeAsync(200);
    expect(lantern).toEqual({ state: 'answered', value: { error: 'lantern did not answer within 200 ms' } });
    expect(hang.state).toBe('running');
    await vi.advanceTimersByTimeAsync(59_800);
    expect(hang).toEqual({ state: 'answered', value: { error: 'hang did not answer within 60000 ms' } });
    expect(ignored?.aborted).toBe(true);
    expect(vi.getTimerCount()).toBe(0);

    expect(d.warnings()).toEqual([
      expect.objectContaining({ plugin: 'tides', tool: 'lantern', timeout_ms: 200, code: 'PLUGIN_TOOL_TIMEOUT', scope: 'web:c1' }),
      expect.objectContaining({ plugin: 'tides', tool: 'hang', timeout_ms: 60_000, code: 'PLUGIN_TOOL_TIMEOUT' }),
    ]);
    expect(d.warnings()[1]!.msg).toBe('plugin tides: tool hang did not answer within 60000 ms; its signal was aborted and the model read an error');
    // A timeout is not a throw of the plugin's: one warning, no error line.
    expect(d.failures).toEqual([]);
  });

  it('the lighthouse fixture (docs/EXTENDING.md): keeper, which stops when its signal aborts, ends at its timeout_ms; foghorn answers as before', async () => {
    const dir = withTempDir('plugin-timeout');
    const file = join(dir, 'daemon.config.toml');
    writeFileSync(
      file,
      `[daemon]\nstate_dir = "${join(dir, 'state')}"\nplugins = ${JSON.stringify([LIGHTHOUSE])}\n\n[[channels]]\nid = "web"\ntype = "webchat"\n`,
    );
    const [folder] = await loadPluginFolders(loadConfig(file, kinds, {}));
    const d = await daemonWith(folder!);
    vi.useFakeTimers();
    expect(await d.tool('foghorn').run({}, ctx())).toBe('BWAAAH');
    const keeper = watch(d.tool('keeper').run({ question: 'is the light on?' }, ctx()));
    await vi.advanceTimersByTimeAsync(4_999);
    expect(keeper.state).toBe('running');
    await vi.advanceTimersByTimeAsync(1);
    expect(keeper).toEqual({ state: 'answered', value: { error: 'keeper did not answer within 5000 ms' } });
    expect(d.warnings()).toEqual([expect.objectContaining({ plugin: 'lighthouse', tool: 'keeper', timeout_ms: 5000 })]);
    expect(d.failures).toEqual([]);
  });

  it('an invalid timeout_ms is refused when the folder loads, naming the folder and the tool, also on a mode tool', async () => {
    const problem = (timeout_ms: unknown) =>
      definitionProblems({ name: 'x', tools: [{ name: 'slow', description: '', input: {}, timeout_ms, run: () => '' }] });
    for (const bad of [0, -5, 1.5, '5000', Number.NaN, 86_400_001, 1e12])
      expect(problem(bad), String(bad)).toEqual([
        expect.stringMatching(/^tools\[0\] \("slow"\): timeout_ms must be a whole number of milliseconds from 1 to 86400000, got /),
      ]);
    for (const good of [undefined, 1, 60_000, 86_400_000]) expect(problem(good)).toEqual([]);

    const dir = withTempDir('plugin-timeout');
    const folder = (name: string, body: string) => {
      mkdirSync(join(dir, name));
      writeFileSync(join(dir, name, 'index.mjs'), `export default { name: '${name}', ${body} };\n`);
    };
    folder('forever', `tools: [{ name: 'wait', description: 'waits', input: {}, timeout_ms: 0, run: () => '' }]`);
    folder(
      'dusk',
      `modes: [{ name: 'dusk', description: 'late', setup: (api) => api.tool({ name: 'dim', description: 'dims', input: {}, timeout_ms: 1e12, run: () => '' }) }]`,
    );
    const file = join(dir, 'daemon.config.toml');
    writeFileSync(file, `[daemon]\nstate_dir = "${join(dir, 'state')}"\nplugins = ["./forever", "./dusk"]\n\n[[channels]]\nid = "web"\ntype = "webchat"\n`);
    const refused = await loadPluginFolders(loadConfig(file, kinds, {})).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(ConfigError);
    expect((refused as ConfigError).problems).toEqual([
      `daemon.config.toml:3:11: daemon.plugins[0]: ${join(dir, 'forever', 'index.mjs')}: tools[0] ("wait"): timeout_ms must be a whole number of milliseconds from 1 to 86400000, got 0`,
      `daemon.config.toml:3:11: daemon.plugins[1]: ${join(dir, 'dusk', 'index.mjs')}: ("dusk") mode "dusk", tool "dim": timeout_ms must be a whole number of milliseconds from 1 to 86400000, got 1000000000000`,
    ]);
  });
});
