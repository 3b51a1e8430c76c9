import { basename } from 'node:path';
import { parse } from 'smol-toml';
import type { LoadedConfig } from '../config/load.js';
import { SourceMap } from '../config/locate.js';
import { formatPath } from '../config/locate.js';
import { problemText, scanSkills } from '../workspace/skills.js';

type Path = (string | number)[];

/**
 * What `channeld check` warns about in a valid config: things the daemon accepts but that are
 * almost surely mistakes. A secret whose value does not have its kind's shape (an app-level
 * token where a bot token belongs), and `echo_delay_ms` left on an agent whose provider is
 * no longer echo, and a SKILL.md in skills_dir the daemon would leave out. Each line reads `file:line:col: key: warning: …`; values are never printed.
 */
export function configWarnings(loaded: LoadedConfig, source: string): string[] {
  const map = new SourceMap(source);
  const name = basename(loaded.file);
  const at = (path: Path, message: string) => {
    const pos = map.find(path, true) ?? map.find(path);
    return { line: pos?.line ?? 0, text: `${name}:${pos ? `${pos.line}:${pos.column}` : '1'}: ${formatPath(path)}: warning: ${message}` };
  };
  const found: { line: number; text: string }[] = [];
  loaded.config.channels.forEach((ch, i) => {
    if (!ch?.enabled) return;
    const shapes = loaded.kinds.of(ch).secrets.shapes ?? {};
    for (const [base, shape] of Object.entries(shapes)) {
      const value = loaded.secrets.get(`channels.${ch.id}`, base);
      if (value === undefined || shape.pattern.test(value)) continue;
      const given = ['env', 'file', 'credential'].map((k) => `${base}_${k}`).find((k) => (ch as Record<string, unknown>)[k] !== undefined) ?? base;
      found.push(at(['channels', i, given], `the value does not look like ${shape.expected}; check that the right secret is in it`));
    }
  });
  let raw: { agent?: Record<string, unknown>; agents?: Record<string, Record<string, unknown>> } = {};
  try {
    raw = parse(source) as typeof raw;
  } catch {
    // Valid config means valid TOML; nothing to add if not.
  }
  const agents: [string, Path, Record<string, unknown> | undefined][] = [
    ['default', ['agent'], raw.agent],
    ...Object.entries(raw.agents ?? {}).map(([n, a]): [string, Path, Record<string, unknown>] => [n, ['agents', n], a]),
  ];
  for (const [agentName, path, table] of agents) {
    const provider = loaded.config.agents[agentName]?.provider;
    if (table?.echo_delay_ms !== undefined && provider !== undefined && provider !== 'echo')
      found.push(at([...path, 'echo_delay_ms'], `only the echo provider reads it; agent "${agentName}" uses ${provider}, so it has no effect (remove it)`));
    // A SKILL.md that breaks the format is left out when the daemon runs: say so before it does.
    const skillsDir = loaded.config.agents[agentName]?.skills_dir;
    if (skillsDir !== undefined && loaded.config.agents[agentName]?.enabled)
      for (const p of scanSkills(skillsDir).problems) found.push(at([...path, 'skills_dir'], `skill left out: ${problemText(p)}`));
  }
  return found.sort((a, b) => a.line - b.line).map((f) => f.text);
}
