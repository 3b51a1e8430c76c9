import { readFileSync, statSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { parse, TomlError } from 'smol-toml';
import type { z } from 'zod';
import { CodedError, ConfigError } from '../contracts/errors.js';
import { formatPath, SourceMap } from './locate.js';
import type { ChannelKinds } from './kinds.js';
import { agentSchema, configSchema, type AgentConfig, type DaemonConfig } from './schema.js';
import { realPathInside } from '../util/inside-dir.js';
import { stateDirProblem } from '../util/state-dir.js';
import { stateDirOf } from '../util/run-files.js';
import { allowedKeys, didYouMean } from './suggest.js';
import { operatorProblems } from './operator-checks.js';
import { providerNames, providerRules } from './providers.js';
import { agentPath, resolveSecrets, type Secrets, type ConfigProblem } from './secrets.js';

/**
 * Every parse of the file is a one-off (start-up, a reload, `channeld check`): zod's fast path,
 * code it generates with `new Function` for each object schema on that schema's first parse,
 * costs more to build than it saves on one parse (the shipped file: 21-32 ms against 6-7 ms
 * without it, on a slower machine). Schemas parsed again and again (actions' inputs) keep it.
 */
const ONCE = { jitless: true } as const;

/** A validated config with its resolved secrets. */
export interface LoadedConfig {
  config: DaemonConfig;
  secrets: Secrets;
  /** The channel kinds it was validated against: what reads each channel's own keys. */
  kinds: ChannelKinds;
  /** The file it came from, for reload. */
  file: string;
}

function describe(value: unknown): string {
  return typeof value === 'string'
    ? JSON.stringify(value)
    : Array.isArray(value)
      ? 'an array'
      : value === null
        ? 'null'
        : typeof value === 'object'
          ? 'a table'
          : String(value);
}

function issueProblems(issue: z.core.$ZodIssue, raw: unknown, kinds: ChannelKinds): ConfigProblem[] {
  const path = issue.path as (string | number)[];
  switch (issue.code) {
    case 'unrecognized_keys':
      return issue.keys.map((k) => {
        const base = kinds.secretBases.find((b) => b === k);
        const near = base ? undefined : didYouMean(k, allowedKeys(path, raw, kinds));
        return {
          path: [...path, k],
          atKey: true,
          message: base
            ? `inline secrets are refused: put the secret in an environment variable, a file or a systemd credential and give ${base}_env, ${base}_file or ${base}_credential`
            : `unknown key "${k}"${near ? `; did you mean \`${near}\`?` : ''}`,
        };
      });
    case 'invalid_value':
      return [{ path, message: `${describe(issue.input)} is not one of ${issue.values.map(String).join(', ')}` }];
    case 'invalid_union':
      if (issue.discriminator !== undefined && issue.errors.length === 0) {
        const input = issue.input as Record<string, unknown> | undefined;
        // zod reports the discriminator issue on the table; the line we want is its `type` key.
        const got = input && typeof input === 'object' ? input.type : undefined;
        return [
          {
            path: path.at(-1) === 'type' ? path : [...path, 'type'],
            message: got === undefined ? `is required: one of ${kinds.names.join(', ')}` : `${describe(got)} is not one of ${kinds.names.join(', ')}`,
          },
        ];
      }
      return [{ path, message: issue.message }];
    case 'invalid_type':
      return [{ path, message: issue.input === undefined ? `is required (${issue.expected})` : `expected ${issue.expected}, got ${describe(issue.input)}` }];
    case 'too_small':
      // A `positive()` bound excludes its minimum: "at least 0" would wrongly allow 0.
      return [{ path, message: `${describe(issue.input)} is too small: must be ${issue.inclusive === false ? 'more than' : 'at least'} ${issue.minimum}` }];
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
  if (Object.keys(agents).length === 0) agents.default = configSchema.shape.agent.unwrap().parse({}, ONCE);
  config.agents = agents;
}

/** Rules that span keys: unique ids, agent bindings, per-provider requirements, each kind's own rules. */
function crossCheck(config: DaemonConfig, problems: ConfigProblem[], kinds: ChannelKinds): void {
  const stateDir = stateDirProblem(config.daemon.state_dir);
  if (stateDir) problems.push({ path: ['daemon', 'state_dir'], message: `"${config.daemon.state_dir}" ${stateDir}` });
  const enabledAgents = Object.entries(config.agents)
    .filter(([, a]) => a.enabled)
    .map(([n]) => n);
  const seen = new Map<string, number>();
  config.channels.forEach((ch, i) => {
    const first = seen.get(ch.id);
    if (first !== undefined) problems.push({ path: ['channels', i, 'id'], message: `"${ch.id}" is already used by channels[${first}]; ids must be unique` });
    else seen.set(ch.id, i);
    if (ch.agent !== undefined) {
      const agent = config.agents[ch.agent];
      if (!agent)
        problems.push({
          path: ['channels', i, 'agent'],
          message: `channel "${ch.id}" is bound to agent "${ch.agent}", which is not defined (defined: ${Object.keys(config.agents).join(', ')})`,
        });
      else if (!agent.enabled)
        problems.push({ path: ['channels', i, 'agent'], message: `channel "${ch.id}" is bound to agent "${ch.agent}", which is disabled` });
    } else if (enabledAgents.length > 1) {
      problems.push({
        path: ['channels', i],
        message: `channel "${ch.id}" needs agent = one of ${enabledAgents.join(', ')}: with several agents the binding is required`,
      });
    } else if (enabledAgents.length === 0) {
      problems.push({ path: ['channels', i], message: `channel "${ch.id}" has no enabled agent to bind to` });
    }
    const kind = kinds.of(ch);
    if (!kind.allowFromOptional && ch.allow_from === undefined) {
      problems.push({ path: ['channels', i], message: `channel "${ch.id}" needs allow_from: a list of sender ids, or ["*"] to let everyone talk to the bot` });
    }
    if (ch.reply_intent === 'classifier') {
      const agent = config.agents[ch.agent ?? enabledAgents[0] ?? 'default'];
      if (agent && (!providerRules(agent.provider)?.endpoint || !agent.base_url))
        problems.push({
          path: ['channels', i, 'reply_intent'],
          message: `reply_intent = "classifier" asks a model on the channel's agent's endpoint: bind channel "${ch.id}" to an openai-compatible agent`,
        });
    }
    for (const p of kind.problems?.(ch) ?? []) problems.push({ path: ['channels', i, ...p.path], message: p.message });
  });
  for (const [name, agent] of Object.entries(config.agents)) {
    agent.fallback_models.forEach((f, i) => {
      const provider = f.slice(0, f.indexOf(':'));
      const rules = providerRules(provider);
      if (!rules)
        problems.push({ path: [...agentPath(config, name, 'fallback_models'), i], message: `"${provider}" is not one of ${providerNames().join(', ')}` });
      else if (rules.requires.includes('base_url') && !agent.base_url)
        problems.push({
          path: [...agentPath(config, name, 'fallback_models'), i],
          message: `agent "${name}" needs base_url for an ${provider} fallback`,
        });
    });
    if (agent.enabled) promptFileProblems(config, name, agent, problems);
    if (agent.enabled && agent.skills_dir !== undefined) {
      const problem = skillsDirProblem(agent.skills_dir);
      if (problem) problems.push({ path: agentPath(config, name, 'skills_dir'), message: problem });
    }
    for (const key of providerRules(agent.provider)?.requires ?? [])
      if (!agent[key]) problems.push({ path: agentPath(config, name, 'provider'), message: `agent "${name}" uses ${agent.provider} and needs ${key}` });
  }
  config.schedules.forEach((s, i) => {
    if (!config.channels.some((c) => c.id === s.channel))
      problems.push({ path: ['schedules', i, 'channel'], message: `schedule "${s.id}" posts to channel "${s.channel}", which is not defined` });
    if (s.agent !== undefined && !config.agents[s.agent]?.enabled)
      problems.push({ path: ['schedules', i, 'agent'], message: `schedule "${s.id}" names agent "${s.agent}", which is not defined or is disabled` });
  });
}

/** What is wrong with a skills_dir (it must be a folder), or undefined. Its skills are checked one by one when read. */
function skillsDirProblem(dir: string): string | undefined {
  try {
    return statSync(dir).isDirectory() ? undefined : `${dir} is not a folder`;
  } catch (err) {
    return `skills folder ${dir} cannot be read (${(err as NodeJS.ErrnoException).code ?? err})`;
  }
}

/** Every prompt file must be a readable file inside the agent's workspace_dir. */
function promptFileProblems(config: DaemonConfig, name: string, agent: AgentConfig, problems: ConfigProblem[]): void {
  const dir = workspaceDirOf(config, name);
  for (const [i, f] of agent.prompt_files.entries()) {
    const path = resolve(dir, f);
    const rel = relative(resolve(dir), path);
    const at = [...agentPath(config, name, 'prompt_files'), i];
    if (rel.startsWith('..') || isAbsolute(rel)) {
      problems.push({ path: at, message: `"${f}" is outside the agent's workspace_dir ${dir}` });
      continue;
    }
    try {
      if (!statSync(path).isFile()) problems.push({ path: at, message: `${path} is not a file` });
      else if (realPathInside(dir, f) === undefined)
        problems.push({ path: at, message: `"${f}" leads outside the agent's workspace_dir ${dir} through a symlink` });
    } catch (err) {
      problems.push({ path: at, message: `prompt file ${path} cannot be read (${(err as NodeJS.ErrnoException).code ?? err})` });
    }
  }
}

/**
 * The parts of an invalid file that are valid on their own, so the rules across keys and
 * the secrets can still be checked: a section that fails takes its defaults, a channel that
 * fails leaves a hole at its index (so later errors keep their `channels[i]`), an agent
 * that fails stands in as an echo agent (so bindings to it are not reported as missing).
 */
function withoutBadKeys<S extends z.ZodType>(schema: S, value: unknown): z.output<S> | undefined {
  const first = schema.safeParse(value, ONCE);
  if (first.success) return first.data;
  if (!value || typeof value !== 'object' || Array.isArray(value)) return undefined;
  // Drop the keys the issues point at (unknown keys, bad values) and let their defaults stand in.
  const bad = new Set(
    first.error.issues.flatMap((i) => (i.code === 'unrecognized_keys' && i.path.length === 0 ? i.keys : i.path.length ? [String(i.path[0])] : [])),
  );
  bad.delete('id');
  bad.delete('type');
  const second = schema.safeParse(Object.fromEntries(Object.entries(value).filter(([k]) => !bad.has(k))), ONCE);
  return second.success ? second.data : undefined;
}

function salvage(raw: unknown, kinds: ChannelKinds): DaemonConfig {
  const r = (raw && typeof raw === 'object' ? raw : {}) as Record<string, unknown>;
  const section = <S extends z.ZodType>(schema: S, value: unknown): z.output<S> => {
    const parsed = schema.safeParse(value, ONCE);
    return parsed.success ? parsed.data : schema.parse(undefined, ONCE);
  };
  const agentOrStandIn = (value: unknown) => {
    const parsed = withoutBadKeys(agentSchema, value ?? {});
    return parsed ?? agentSchema.parse({ enabled: (value as { enabled?: unknown } | undefined)?.enabled !== false }, ONCE);
  };
  const channels: DaemonConfig['channels'] = [];
  if (Array.isArray(r.channels)) {
    r.channels.forEach((c, i) => {
      const parsed = withoutBadKeys(kinds.channelSchema, c);
      if (parsed) channels[i] = parsed;
    });
  }
  const agents = r.agents && typeof r.agents === 'object' ? Object.fromEntries(Object.entries(r.agents).map(([n, a]) => [n, agentOrStandIn(a)])) : {};
  return {
    daemon: section(configSchema.shape.daemon, r.daemon),
    http: section(configSchema.shape.http, r.http),
    limits: section(configSchema.shape.limits, r.limits),
    observe: section(configSchema.shape.observe, r.observe),
    ...(r.agent !== undefined ? { agent: agentOrStandIn(r.agent) } : {}),
    agents,
    models: section(configSchema.shape.models, r.models),
    channels,
    schedules: section(configSchema.shape.schedules, r.schedules),
  };
}

/** A TOML syntax error; a string left open at the end of its line is named as such, not as a control character. */
function syntaxProblem(err: TomlError, source: string, name: string): string {
  const first = err.message.split('\n')[0]!.replace(/^Invalid TOML document: /, '');
  const line = source.split(/\r?\n/)[err.line - 1] ?? '';
  const atEnd = err.column > line.trimEnd().length;
  if (/unfinished string/.test(first) || (/control characters/.test(first) && atEnd)) {
    let quote: { ch: string; col: number } | undefined;
    for (let i = 0; i < line.length; i++) {
      const c = line[i]!;
      if (quote) {
        if (c === '\\' && quote.ch === '"') i++;
        else if (c === quote.ch) quote = undefined;
      } else if (c === '#') break;
      else if (c === '"' || c === "'") quote = { ch: c, col: i + 1 };
    }
    if (quote)
      return `${name}:${err.line}:${quote.col}: syntax: unterminated string: the ${quote.ch} opened here is not closed on this line (add the closing ${quote.ch}, or use ${quote.ch.repeat(3)} for a multi-line string)`;
  }
  return `${name}:${err.line}:${err.column}: syntax: ${first}`;
}

/**
 * Parses and validates config text against the core's sections and the channel `kinds`
 * this build runs. Throws ConfigError whose problems read `file:line:col: key.path: message`,
 * one per problem, in file order.
 */
export function parseConfig(source: string, file: string, kinds: ChannelKinds, env: NodeJS.ProcessEnv = process.env): LoadedConfig {
  const name = basename(file);
  let raw: unknown;
  try {
    raw = parse(source);
  } catch (err) {
    if (err instanceof TomlError) throw new ConfigError([syntaxProblem(err, source, name)], { cause: err });
    throw err;
  }
  const map = new SourceMap(source);
  const result = kinds.configSchema.safeParse(raw, { ...ONCE, reportInput: true });
  const problems: ConfigProblem[] = result.success ? [] : result.error.issues.flatMap((i) => issueProblems(i, raw, kinds));
  // Every stage runs, on what is valid of the file when some of it is not, so one run shows every error.
  const config = result.success ? result.data : salvage(raw, kinds);
  // Relative to the config file's folder (as plugin folders are), not to wherever the daemon or the CLI was started.
  config.daemon.state_dir = stateDirOf(file, config.daemon.state_dir);
  mergeAgents(config, problems);
  // skills_dir too is relative to the config file's folder.
  for (const agent of Object.values(config.agents)) if (agent.skills_dir !== undefined) agent.skills_dir = resolve(dirname(resolve(file)), agent.skills_dir);
  crossCheck(config, problems, kinds);
  const { secrets, problems: secretProblems } = resolveSecrets(config, env, kinds);
  // An inline `token = "..."` was already refused; "needs token_env" on top of it says nothing new.
  const named = new Set(problems.map((p) => JSON.stringify(p.path)));
  problems.push(...secretProblems.filter((p) => !p.secret || !named.has(JSON.stringify([...p.path, p.secret]))));
  problems.push(...operatorProblems(config, env, secrets));
  if (problems.length > 0) {
    const lines = problems
      .map((p) => ({ p, pos: map.find(p.path, p.atKey) }))
      .sort((a, b) => (a.pos?.line ?? 0) - (b.pos?.line ?? 0))
      .map(({ p, pos }) => `${name}:${pos ? `${pos.line}:${pos.column}` : '1'}: ${formatPath(p.path)}: ${p.message}`);
    throw new ConfigError(lines);
  }
  return { config, secrets, kinds, file };
}

/** Reads and validates a config file (see parseConfig). */
export function loadConfig(file: string, kinds: ChannelKinds, env: NodeJS.ProcessEnv = process.env): LoadedConfig {
  let source: string;
  try {
    source = readFileSync(file, 'utf8');
  } catch (err) {
    throw new CodedError('CONFIG_NOT_FOUND', `${file}: ${(err as NodeJS.ErrnoException).code ?? err}`, { cause: err });
  }
  return parseConfig(source, file, kinds, env);
}

/** The agent a channel is bound to: explicit, or the only enabled one. */
export function agentOf(config: DaemonConfig, channelId: string): string {
  const ch = config.channels.find((c) => c.id === channelId);
  if (ch?.agent) return ch.agent;
  // Asked once per message: a loop over the keys, not an array of entries each time.
  for (const name in config.agents) if (Object.hasOwn(config.agents, name) && config.agents[name]!.enabled) return name;
  return 'default';
}

/** An agent's own folder: `workspace_dir`, or `<state_dir>/agents/<name>`. */
export function workspaceDirOf(config: DaemonConfig, name: string): string {
  return config.agents[name]?.workspace_dir ?? join(config.daemon.state_dir, 'agents', name);
}
