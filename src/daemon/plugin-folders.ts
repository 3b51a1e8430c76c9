import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { LoadedConfig } from '../config/load.js';
import { SourceMap } from '../config/locate.js';
import { type CodedError, ConfigError, errorMessage } from '../contracts/errors.js';
import { phases } from '../contracts/hooks.js';
import { MESSAGE_HOOK_MAX_TIMEOUT_MS, messagePhases } from '../contracts/message-hooks.js';
import { PLUGIN_TOOL_MAX_TIMEOUT_MS, PLUGIN_TOOL_TIMEOUT_MS, type PluginDefinition, type PluginTool } from '../contracts/plugin-folder.js';
import type { ToolContext } from '../contracts/tools.js';
import { timedTool } from '../runtime/tool-registry.js';
import { pluginClashes } from './plugin-clashes.js';
import { defineComponent, type DaemonComponent } from './services.js';

/**
 * A plugin folder's entry, first found wins. JavaScript always; `index.ts` only where this
 * Node can import TypeScript (Node ≥ 22.18 strips types by default, or the daemon runs
 * under tsx): the built daemon does not compile plugin folders.
 */
export const INDEX_FILES = ['index.js', 'index.mjs', 'index.ts'] as const;

/** A configured plugin folder, loaded and checked. */
export interface PluginFolder {
  /** As written in `[daemon] plugins`. */
  configured: string;
  /** Its index file, absolute. */
  index: string;
  definition: PluginDefinition;
}

const NAME = /^[A-Za-z0-9_-]+$/;
/** How long one plugin folder's index may take to import. */
export const PLUGIN_IMPORT_TIMEOUT_MS = 10_000;
class ImportTimeout extends Error {}
const KEYS = new Set(['name', 'description', 'modes', 'tools', 'hooks', 'commands']);

const isFn = (v: unknown) => typeof v === 'function';
const isStr = (v: unknown) => typeof v === 'string' && v.length > 0;
const kind = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v);
/** What is wrong with a tool's `timeout_ms`, if anything (absent is the default). */
const timeoutProblem = (v: unknown) =>
  v !== undefined && !(Number.isInteger(v) && (v as number) > 0 && (v as number) <= PLUGIN_TOOL_MAX_TIMEOUT_MS)
    ? `timeout_ms must be a whole number of milliseconds from 1 to ${PLUGIN_TOOL_MAX_TIMEOUT_MS}, got ${typeof v === 'string' ? JSON.stringify(v) : String(v)}`
    : undefined;

/** What is wrong with a default export, one line per problem; empty when it is a valid definition. */
export function definitionProblems(value: unknown): string[] {
  if (value === undefined) return ['has no default export (write `export default { name, modes, tools, hooks, commands }`)'];
  if (!value || typeof value !== 'object' || Array.isArray(value)) return [`the default export is ${kind(value)}, not a plugin definition object`];
  const d = value as Record<string, unknown>;
  const out: string[] = [];
  for (const k of Object.keys(d)) if (!KEYS.has(k)) out.push(`unknown key "${k}" in the default export (allowed: ${[...KEYS].join(', ')})`);
  if (typeof d.name !== 'string' || !NAME.test(d.name)) out.push('name must be a string of letters, digits, "_" and "-"');
  if (d.description !== undefined && typeof d.description !== 'string') out.push('description must be a string');
  const list = (key: string, check: (item: Record<string, unknown>) => string | undefined) => {
    const v = d[key];
    if (v === undefined) return;
    if (!Array.isArray(v)) return void out.push(`${key} must be an array, got ${kind(v)}`);
    v.forEach((item: unknown, i) => {
      const problem = item && typeof item === 'object' ? check(item as Record<string, unknown>) : `is ${kind(item)}, not an object`;
      if (problem) out.push(`${key}[${i}]${isStr((item as { name?: unknown } | null)?.name) ? ` ("${(item as { name: string }).name}")` : ''}: ${problem}`);
    });
  };
  list('modes', (m) =>
    !isStr(m.name) ? 'needs a name' : typeof m.description !== 'string' ? 'needs a description' : !isFn(m.setup) ? 'setup must be a function' : undefined,
  );
  list('tools', (t) =>
    !isStr(t.name)
      ? 'needs a name'
      : typeof t.description !== 'string'
        ? 'needs a description'
        : !t.input || typeof t.input !== 'object'
          ? 'input must be a zod schema or a jsonSchema()'
          : !isFn(t.run)
            ? 'run must be a function'
            : t.approval !== undefined && t.approval !== 'always' && t.approval !== 'never'
              ? 'approval must be "always" or "never"'
              : ['requires_sandbox', 'enabled_by_default'].find((k) => t[k] !== undefined && typeof t[k] !== 'boolean')
                ? 'requires_sandbox and enabled_by_default must be true or false'
                : timeoutProblem(t.timeout_ms),
  );
  list('hooks', (h) =>
    !isStr(h.name)
      ? 'needs a name'
      : ![...phases, ...messagePhases].includes(h.phase as never)
        ? `phase must be one of ${[...phases, ...messagePhases].join(', ')}`
        : !isFn(h.run)
          ? 'run must be a function'
          : h.timeout_ms !== undefined &&
              !(Number.isInteger(h.timeout_ms) && (h.timeout_ms as number) > 0 && (h.timeout_ms as number) <= MESSAGE_HOOK_MAX_TIMEOUT_MS)
            ? `timeout_ms must be a whole number of milliseconds from 1 to ${MESSAGE_HOOK_MAX_TIMEOUT_MS}`
            : undefined,
  );
  list('commands', (c) =>
    !isStr(c.name) ? 'needs a name' : typeof c.help !== 'string' ? 'needs a help line' : !isFn(c.handler) ? 'handler must be a function' : undefined,
  );
  return out;
}

/** Loads one folder; returns its problems instead when it cannot be used. */
async function loadOne(configured: string, base: string): Promise<PluginFolder | string[]> {
  const dir = resolve(base, configured);
  let isDir = false;
  try {
    isDir = statSync(dir).isDirectory();
  } catch (err) {
    return [`plugin folder ${dir} cannot be read (${(err as NodeJS.ErrnoException).code ?? errorMessage(err)})`];
  }
  if (!isDir) return [`${dir} is not a folder`];
  const index = INDEX_FILES.map((f) => join(dir, f)).find((f) => existsSync(f));
  if (!index) return [`plugin folder ${dir} has no ${INDEX_FILES.join(', ')}`];
  let mod: { default?: unknown };
  let timer: NodeJS.Timeout | undefined;
  try {
    // A top-level await that never settles would hang the start (and end it with exit 13, naming nothing).
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new ImportTimeout()), PLUGIN_IMPORT_TIMEOUT_MS);
    });
    mod = (await Promise.race([import(pathToFileURL(index).href), timedOut])) as { default?: unknown };
  } catch (err) {
    if (err instanceof ImportTimeout)
      return [`${index} did not finish loading within ${PLUGIN_IMPORT_TIMEOUT_MS} ms (does its top level await something that never settles?)`];
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ERR_UNKNOWN_FILE_EXTENSION' && index.endsWith('.ts'))
      return [`${index}: this Node cannot load TypeScript; compile the plugin to index.js (or use Node 22.18 or later, or run under tsx)`];
    return [`${index} could not be loaded: ${errorMessage(err)}`];
  } finally {
    clearTimeout(timer);
  }
  const problems = definitionProblems(mod.default);
  if (problems.length) return problems.map((p) => `${index}: ${p}`);
  return { configured, index, definition: mod.default as PluginDefinition };
}

/**
 * Loads every folder in `[daemon] plugins` (paths relative to the config file). Throws a
 * ConfigError with one `file:line:col: daemon.plugins[i]: …` line per problem: a missing
 * folder, no index, an index that fails to load, a bad default export, a name used twice.
 */
export async function loadPluginFolders(loaded: LoadedConfig): Promise<PluginFolder[]> {
  const paths = loaded.config.daemon.plugins;
  if (!paths.length) return [];
  const base = dirname(resolve(loaded.file));
  const results = await Promise.all(paths.map((p) => loadOne(p, base)));
  const problems: Array<{ i: number; message: string }> = [];
  const seen = new Map<string, number>();
  for (const [i, r] of results.entries()) {
    if (Array.isArray(r)) {
      problems.push(...r.map((message) => ({ i, message })));
      continue;
    }
    const first = seen.get(r.definition.name);
    if (first !== undefined) problems.push({ i, message: `${r.index}: plugin name "${r.definition.name}" is already used by daemon.plugins[${first}]` });
    else seen.set(r.definition.name, i);
  }
  // Bounded as they will run, so a mode's tool with a bad timeout_ms is refused here too (its setup runs then).
  const loadedOnes = results.flatMap((r, i) => (Array.isArray(r) ? [] : [{ i, definition: timedDefinition(r.definition, () => {}), index: r.index }]));
  for (const c of pluginClashes(loadedOnes)) problems.push({ i: c.i, message: `${loadedOnes.find((l) => l.i === c.i)!.index}: ${c.message}` });
  if (problems.length) {
    let map: SourceMap | undefined;
    try {
      map = new SourceMap(readFileSync(loaded.file, 'utf8'));
    } catch {
      map = undefined;
    }
    const name = basename(loaded.file);
    throw new ConfigError(
      problems.map(({ i, message }) => {
        const pos = map?.find(['daemon', 'plugins', i]);
        return `${name}:${pos ? `${pos.line}:${pos.column}` : '1'}: daemon.plugins[${i}]: ${message}`;
      }),
    );
  }
  return results as PluginFolder[];
}

/** A plugin tool call that passed its `timeout_ms`: which tool, the bound, and the call's context. */
export type ToolTimeout = (tool: string, timeoutMs: number, err: CodedError, ctx: ToolContext) => void;

/**
 * The definition with every tool bounded in time: its own `tools` and those its modes' setup()
 * adds, each by its `timeout_ms` (default PLUGIN_TOOL_TIMEOUT_MS; see timedTool). A mode tool's
 * bad `timeout_ms` throws when its setup runs (definitionProblems sees only the folder's own).
 */
export function timedDefinition(d: PluginDefinition, onTimeout: ToolTimeout): PluginDefinition {
  const timed = (t: PluginTool, mode?: string): PluginTool => {
    const problem = timeoutProblem(t.timeout_ms);
    if (problem) throw new Error(`${mode ? `mode "${mode}", ` : ''}tool "${t.name}": ${problem}`);
    const ms = t.timeout_ms ?? PLUGIN_TOOL_TIMEOUT_MS;
    return timedTool(t, ms, (err, ctx) => onTimeout(t.name, ms, err, ctx));
  };
  return {
    ...d,
    ...(d.tools ? { tools: d.tools.map((t) => timed(t)) } : {}),
    ...(d.modes ? { modes: d.modes.map((m) => ({ ...m, setup: (api) => m.setup({ ...api, tool: (t) => api.tool(timed(t, m.name)) }) })) } : {}),
  };
}

/**
 * A loaded plugin folder as a kernel component (named `plugin:NAME`): its definition joins the
 * `extensions` service, each tool bounded in time; a call past its bound is logged as a warning.
 */
export function pluginFolderComponent(folder: PluginFolder): DaemonComponent {
  const plugin = folder.definition.name;
  return defineComponent({
    name: `plugin:${plugin}`,
    inject: ['extensions', 'logger'],
    start: (ctx) => {
      const log = ctx.use('logger');
      const definition = timedDefinition(folder.definition, (tool, timeoutMs, err, call) =>
        log.warn(
          { plugin, folder: folder.configured, tool, timeout_ms: timeoutMs, scope: call.scope, code: err.code },
          `plugin ${plugin}: tool ${tool} did not answer within ${timeoutMs} ms; its signal was aborted and the model read an error`,
        ),
      );
      ctx.effect(ctx.use('extensions').add(folder.configured, definition));
    },
  });
}
