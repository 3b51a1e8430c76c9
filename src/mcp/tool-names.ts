import { createHash } from 'node:crypto';

/** What model APIs accept as a function name (OpenAI's rule; others' are no wider). */
export const MODEL_TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const MAX_NAME_CHARS = 64;
/** `_` and 8 hex digits of the MCP name's SHA-256: what keeps a shortened or clashing name apart. */
const HASH_SUFFIX_CHARS = 9;

/** `server__tool`: the name the model sees, when the model API takes it as it is. */
export function toolName(server: string, tool: string): string {
  return `${server}__${tool}`;
}

/**
 * The names the model is offered for one server's tools, by MCP name. MCP allows names a model
 * API refuses (dots, slashes, up to 128 characters) and one refused name fails every request of
 * the turn, so: `server__tool` where the API takes it; otherwise other characters become `_`,
 * and a name still too long, or taken by another tool, is shortened and ends in a hash of the
 * MCP name. Names taken as they are go first, so a renamed tool never takes another's own
 * name; the same list gives the same names every time.
 */
export function modelToolNames(server: string, tools: readonly string[]): Map<string, string> {
  const names = new Map<string, string>();
  const taken = new Set<string>();
  for (const tool of tools) {
    const name = toolName(server, tool);
    if (!MODEL_TOOL_NAME.test(name) || taken.has(name)) continue;
    names.set(tool, name);
    taken.add(name);
  }
  for (const tool of tools) {
    if (names.has(tool)) continue;
    let name = toolName(server, tool.replace(/[^a-zA-Z0-9_-]/g, '_'));
    if (name.length > MAX_NAME_CHARS || taken.has(name)) {
      const hash = createHash('sha256')
        .update(tool)
        .digest('hex')
        .slice(0, HASH_SUFFIX_CHARS - 1);
      name = `${name.slice(0, MAX_NAME_CHARS - HASH_SUFFIX_CHARS)}_${hash}`;
    }
    names.set(tool, name);
    taken.add(name);
  }
  return names;
}
