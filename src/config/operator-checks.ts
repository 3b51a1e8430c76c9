import type { DaemonConfig } from './schema.js';
import { agentPath, type ConfigProblem, type Secrets } from './secrets.js';

/**
 * Mistakes `check` refuses that no single key's schema can see: MCP server names used
 * twice in one agent (their tools would clash as `server__tool`), `headers_env` naming a
 * variable that is not set (the server would fail at every connect), and a cluster URL
 * that does not parse (the daemon would exit at start), a `transcription_model` not marked
 * as taking audio in `[models]`, a `speech_model` or `memory_embedding_model` with no `[models]` entry.
 */
export function operatorProblems(config: DaemonConfig, env: NodeJS.ProcessEnv, secrets: Secrets): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  for (const [name, agent] of Object.entries(config.agents)) {
    const seen = new Map<string, number>();
    agent.mcp.forEach((server, i) => {
      const at = [...agentPath(config, name, 'mcp'), i];
      const first = seen.get(server.name);
      if (first !== undefined)
        problems.push({ path: [...at, 'name'], message: `"${server.name}" is already the name of mcp[${first}]; names must be unique per agent` });
      else seen.set(server.name, i);
      for (const [header, variable] of Object.entries(server.headers_env))
        if (env[variable] === undefined) problems.push({ path: [...at, 'headers_env', header], message: `environment variable ${variable} is not set` });
    });
    // A transcription model the [models] table does not mark as taking audio would fail every voice note.
    const heard = agent.transcription_model;
    if (heard !== undefined && !config.models[heard]?.input.includes('audio'))
      problems.push({ path: agentPath(config, name, 'transcription_model'), message: `add [models."${heard}"] with input = ["audio"]` });
    for (const key of ['speech_model', 'memory_embedding_model'] as const) {
      const model = agent[key];
      if (model !== undefined && !config.models[model]) problems.push({ path: agentPath(config, name, key), message: `add [models."${model}"]` });
    }
  }
  if (config.cluster) {
    for (const base of ['nats_url', 'postgres_url']) {
      const value = secrets.get('cluster', base);
      if (value === undefined || URL.canParse(value)) continue;
      const cluster = config.cluster as unknown as Record<string, unknown>;
      const key = ['env', 'file', 'credential'].map((k) => `${base}_${k}`).find((k) => cluster[k] !== undefined) ?? base;
      problems.push({
        path: ['cluster', key],
        message: `the ${base} it names is not a URL (e.g. "${base === 'nats_url' ? 'nats://127.0.0.1:4222' : 'postgres://user@host/db'}")`,
      });
    }
  }
  return problems;
}
