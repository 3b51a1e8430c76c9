import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { parse, TomlError } from 'smol-toml';
import type { z } from 'zod';
import { CodedError, ConfigError } from '../errors.js';
import { formatPath, SourceMap } from './locate.js';
import { configSchema, secretBases, type AgentConfig, type DaemonConfig } from './schema.js';
import { agentPath, resolveSecrets, Secrets, type ConfigProblem } from './secrets.js';

/** A validated config with its resolved secrets. */
export interface LoadedConfig {
  config: DaemonConfig;
  secrets: Secrets;
  /** The file it came from, for reload. */
  file: string;
}

function describe(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : Array.isArray(value) ? 'an array' : value === null ? 'null' : typeof value === 'object' ? 'a table' : String(value);
}

function issueProblems(issue: z.core.$ZodIssue): ConfigProblem[] {
  const path = issue.path as (string | number)[];
  switch (issue.code) {
    case 'unrecognized_keys':
      return issue.keys.map((k) => {
        const base = secretBases.find((b) => b === k);
        return {
          path: [...path, k],
          atKey: true,
          message: base
            ? `inline secrets are refused: put the secret in an environment variable, a file or a systemd credential and give ${base}_env, ${base}_file or ${base}_credential`
            : `unknown key "${k}"`,
        };
      });
    case 'invalid_value':
      return [{ path, message: `${describe(issue.input)} is not one of ${issue.values.map(String).join(', ')}` }];
    case 'invalid_union':
      if (issue.discriminator !== undefined && issue.errors.length === 0) {
        const input = issue.input as Record<string, unknown> | undefined;
        // zod reports the discriminator issue on the table; the line we want is its `type` key.
        const got = input && typeof input === 'object' ? input.type : undefined;
        return [{ path: path.at(-1) === 'type' ? path : [...path, 'type'], message: got === undefined ? 'is required: one of webchat, telegram, discord, slack' : `${describe(got)} is not one of webchat, telegram, discord, slack` }];
      }
      return [{ path, message: issue.message }];
    case 'invalid_type':
      return [{ path, message: issue.input === undefined ? `is required (${issue.expected})` : `expected ${issue.expected}, got ${describe(issue.input)}` }];
    case 'too_small':
      return [{ path, message: `${describe(issue.input)} is too small: must be at least ${issue.minimum}` }];
    case 'too_big':
      return [{ path, message: `${describe(issue.input)} is too big: must be at most ${issue.maximum}` }];
    default:
      return [{ path, message: issue.message }];
  }
}

/** The agents by name: `[agent]` is the agent named "default". */
function mergeAgents(config: DaemonConfig, problems: ConfigProblem[]): void {
  const agents: Record<string, AgentConfig> = { ...config.agents };
  if (config.agent) {
    if (agents.default) problems.push({ path: ['agents', 'default'], message: '[agent] already defines the agent named "default"; use one of the two' });
    agents.default = config.agent;
  }
  if (Object.keys(agents).length === 0) agents.default = configSchema.shape.agent.unwrap().parse({});
  config.agents = agents;
}

/** Rules that span keys: unique ids, agent bindings, per-provider requirements. */
function crossCheck(config: DaemonConfig, problems: ConfigProblem[]): void {
  const enabledAgents = Object.entries(config.agents).filter(([, a]) => a.enabled).map(([n]) => n);
  const seen = new Map<string, number>();
  config.channels.forEach((ch, i) => {
    const first = seen.get(ch.id);
    if (first !== undefined) problems.push({ path: ['channels', i, 'id'], message: `"${ch.id}" is already used by channels[${first}]; ids must be unique` });
    else seen.set(ch.id, i);
    if (ch.agent !== undefined) {
      const agent = config.agents[ch.agent];
      if (!agent) problems.push({ path: ['channels', i, 'agent'], message: `channel "${ch.id}" is bound to agent "${ch.agent}", which is not defined (defined: ${Object.keys(config.agents).join(', ')})` });
      else if (!agent.enabled) problems.push({ path: ['channels', i, 'agent'], message: `channel "${ch.id}" is bound to agent "${ch.agent}", which is disabled` });
    } else if (enabledAgents.length > 1) {
      problems.push({ path: ['channels', i], message: `channel "${ch.id}" needs agent = one of ${enabledAgents.join(', ')}: with several agents the binding is required` });
    } else if (enabledAgents.length === 0) {
      problems.push({ path: ['channels', i], message: `channel "${ch.id}" has no enabled agent to bind to` });
    }
    if (ch.type !== 'webchat' && ch.allow_from === undefined) {
      problems.push({ path: ['channels', i], message: `channel "${ch.id}" needs allow_from: a list of sender ids, or ["*"] to let everyone talk to the bot` });
    }
    if (ch.reply_intent === 'classifier') {
      const agent = config.agents[ch.agent ?? enabledAgents[0] ?? 'default'];
      if (agent && (agent.provider !== 'openai-compatible' || !agent.base_url)) problems.push({ path: ['channels', i, 'reply_intent'], message: `reply_intent = "classifier" asks a model on the channel's agent's endpoint: bind channel "${ch.id}" to an openai-compatible agent` });
    }
    if (ch.type === 'telegram' && ch.mode === 'webhook' && !ch.public_url) {
      problems.push({ path: ['channels', i, 'mode'], message: `webhook mode needs public_url (the https address Telegram should post to)` });
    }
  });
  for (const [name, agent] of Object.entries(config.agents)) {
    agent.fallback_models.forEach((f, i) => {
      const provider = f.slice(0, f.indexOf(':'));
      if (provider !== 'echo' && provider !== 'openai-compatible') problems.push({ path: [...agentPath(config, name, 'fallback_models'), i], message: `"${provider}" is not one of echo, openai-compatible` });
      else if (provider === 'openai-compatible' && !agent.base_url) problems.push({ path: [...agentPath(config, name, 'fallback_models'), i], message: `agent "${name}" needs base_url for an openai-compatible fallback` });
    });
    if (agent.provider !== 'openai-compatible') continue;
    if (!agent.base_url) problems.push({ path: agentPath(config, name, 'provider'), message: `agent "${name}" uses openai-compatible and needs base_url` });
    if (!agent.model) problems.push({ path: agentPath(config, name, 'provider'), message: `agent "${name}" uses openai-compatible and needs model` });
  }
}

/**
 * Parses and validates config text. Throws ConfigError whose problems read
 * `file:line:col: key.path: message`, one per problem, in file order.
 */
export function parseConfig(source: string, file: string, env: NodeJS.ProcessEnv = process.env): LoadedConfig {
  const name = basename(file);
  let raw: unknown;
  try {
    raw = parse(source);
  } catch (err) {
    if (err instanceof TomlError) {
      const first = err.message.split('\n')[0];
      throw new ConfigError([`${name}:${err.line}:${err.column}: syntax: ${first}`], { cause: err });
    }
    throw err;
  }
  const map = new SourceMap(source);
  const result = configSchema.safeParse(raw, { reportInput: true });
  const problems: ConfigProblem[] = result.success ? [] : result.error.issues.flatMap(issueProblems);
  let secrets = new Secrets();
  if (result.success) {
    mergeAgents(result.data, problems);
    crossCheck(result.data, problems);
    if (problems.length === 0) {
      const resolved = resolveSecrets(result.data, env);
      secrets = resolved.secrets;
      problems.push(...resolved.problems);
    }
  }
  if (problems.length > 0) {
    const lines = problems
      .map((p) => ({ p, pos: map.find(p.path, p.atKey) }))
      .sort((a, b) => (a.pos?.line ?? 0) - (b.pos?.line ?? 0))
      .map(({ p, pos }) => `${name}:${pos ? `${pos.line}:${pos.column}` : '1'}: ${formatPath(p.path)}: ${p.message}`);
    throw new ConfigError(lines);
  }
  return { config: result.data!, secrets, file };
}

/** Reads and validates a config file. */
export function loadConfig(file: string, env: NodeJS.ProcessEnv = process.env): LoadedConfig {
  let source: string;
  try {
    source = readFileSync(file, 'utf8');
  } catch (err) {
    throw new CodedError('CONFIG_NOT_FOUND', `${file}: ${(err as NodeJS.ErrnoException).code ?? err}`, { cause: err });
  }
  return parseConfig(source, file, env);
}

/** The agent a channel is bound to: explicit, or the only enabled one. */
export function agentOf(config: DaemonConfig, channelId: string): string {
  const ch = config.channels.find((c) => c.id === channelId);
  if (ch?.agent) return ch.agent;
  return Object.entries(config.agents).find(([, a]) => a.enabled)?.[0] ?? 'default';
}
