import { builtinActions } from '../actions/builtin/index.js';
import { errorMessage } from '../contracts/errors.js';
import type { PluginDefinition } from '../contracts/plugin-folder.js';
import { isMessageHook } from '../contracts/message-hooks.js';
import { registerBuiltins, type BuiltinInfo } from '../runtime/builtins.js';
import { Runtime } from '../runtime/runtime.js';
import { registerToolCommands } from '../tools/controls.js';

/**
 * A runtime holding only what every agent has: the built-in commands, tools and modes, and
 * the slash faces of the built-in actions. Nothing on it ever runs; plugin definitions are
 * registered on it to find clashes the way a workspace would meet them.
 */
function builtinRuntime(): Runtime {
  const runtime = new Runtime({
    runnerFor: () => {
      throw new Error('a runtime for checking plugin folders runs no turns');
    },
  });
  // The info is read only by handlers, which never run here.
  registerBuiltins(runtime, { agentName: 'check', statusFromActions: true } as unknown as BuiltinInfo);
  registerToolCommands(runtime);
  for (const a of builtinActions) if (a.slash) runtime.commands.register({ name: a.slash.name ?? a.name, help: a.description, handler: () => '' });
  return runtime;
}

/**
 * What the plugin folders' definitions clash with, one message per folder index: a command
 * (or alias) that is built in or that an earlier folder defines, and any other name a
 * workspace would refuse (a tool, mode or hook used twice). `run` would otherwise fail to
 * start every agent with exit 1; `check` and `run` refuse them as configuration (78).
 */
export function pluginClashes(definitions: ReadonlyArray<{ i: number; definition: PluginDefinition }>): Array<{ i: number; message: string }> {
  const builtins = builtinRuntime();
  const builtinNames = new Set(
    builtins.commands.list(new Set(builtins.modes.list().map((m) => m.name))).flatMap((c) => [c.name, ...(c.aliases ?? [])].map((n) => n.toLowerCase())),
  );
  const runtime = builtinRuntime();
  const owners = new Map<string, number>();
  const out: Array<{ i: number; message: string }> = [];
  for (const { i, definition: d } of definitions) {
    const before = out.length;
    for (const cmd of d.commands ?? []) {
      for (const n of [cmd.name, ...(cmd.aliases ?? [])].map((x) => x.toLowerCase())) {
        const owner = owners.get(n);
        if (builtinNames.has(n)) out.push({ i, message: `command "/${n}" is a built-in command; give it another name` });
        else if (owner !== undefined) out.push({ i, message: `command "/${n}" is already defined by daemon.plugins[${owner}]` });
        else owners.set(n, i);
      }
    }
    if (out.length > before) continue;
    try {
      for (const m of d.modes ?? []) runtime.modes.register(m);
      for (const t of d.tools ?? []) runtime.tools.register(t);
      const messageHooks = new Set<string>();
      for (const h of d.hooks ?? []) {
        if (!isMessageHook(h)) runtime.hooks.register(h);
        else if (messageHooks.has(`${h.phase}:${h.name}`)) throw new Error(`a ${h.phase} hook named "${h.name}" is listed twice`);
        else messageHooks.add(`${h.phase}:${h.name}`);
      }
      for (const c of d.commands ?? []) runtime.commands.register(c);
    } catch (err) {
      out.push({ i, message: `("${d.name}") ${errorMessage(err)}` });
    }
  }
  return out;
}
