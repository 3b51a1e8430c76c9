import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ChannelKinds } from './kinds.js';
import type { DaemonConfig } from './schema.js';
import { secretKinds } from './schema.js';

export interface ConfigProblem {
  path: (string | number)[];
  message: string;
  atKey?: boolean;
  /** Set on "needs X_env, X_file or X_credential": the secret's base name. */
  secret?: string;
}

/**
 * Resolved secret values, keyed by owner (`channels.<id>`, `http`, `agents.<name>`) and base
 * name. Values never appear in `toJSON`/`inspect`, so logging this object leaks nothing.
 */
export class Secrets {
  readonly #values = new Map<string, string>();

  set(owner: string, base: string, value: string): void {
    this.#values.set(`${owner}/${base}`, value);
  }
  get(owner: string, base: string): string | undefined {
    return this.#values.get(`${owner}/${base}`);
  }
  /** One owner's resolved secrets as `[base, value]`, sorted by base: what a reload compares. */
  of(owner: string): [string, string][] {
    const prefix = `${owner}/`;
    return [...this.#values]
      .filter(([k]) => k.startsWith(prefix))
      .map(([k, v]): [string, string] => [k.slice(prefix.length), v])
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  }
  /** Every resolved value, for the log redactor. */
  values(): string[] {
    return [...this.#values.values()];
  }
  toJSON(): string {
    return '[secrets]';
  }
  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return '[secrets]';
  }
}

function readSecret(kind: (typeof secretKinds)[number], ref: string, env: NodeJS.ProcessEnv, where: string): { value?: string; error?: string } {
  if (kind === 'env') {
    const v = env[ref];
    return v ? { value: v } : { error: `environment variable ${ref} is not set or empty (${where})` };
  }
  const dir = env.CREDENTIALS_DIRECTORY;
  if (kind === 'credential' && !dir) {
    return { error: `$CREDENTIALS_DIRECTORY is not set, so credential "${ref}" cannot be read (${where}); add LoadCredential=${ref}:/path to the unit` };
  }
  const file = kind === 'file' ? ref : join(dir!, ref);
  try {
    const v = readFileSync(file, 'utf8').trim();
    return v ? { value: v } : { error: `${file} is empty (${where})` };
  } catch (err) {
    return { error: `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? err} (${where})` };
  }
}

function resolveOne(
  section: Record<string, unknown>,
  base: string,
  required: boolean,
  path: (string | number)[],
  owner: string,
  where: string,
  env: NodeJS.ProcessEnv,
  secrets: Secrets,
  problems: ConfigProblem[],
): void {
  const given = secretKinds.filter((k) => section[`${base}_${k}`] !== undefined);
  if (given.length > 1) {
    problems.push({ path: [...path, `${base}_${given[1]}`], message: `give only one of ${secretKinds.map((k) => `${base}_${k}`).join(', ')}` });
    return;
  }
  const kind = given[0];
  if (!kind) {
    if (required) problems.push({ path, secret: base, message: `${where} needs ${secretKinds.map((k) => `${base}_${k}`).join(', or ')}` });
    return;
  }
  const { value, error } = readSecret(kind, String(section[`${base}_${kind}`]), env, where);
  if (error) problems.push({ path: [...path, `${base}_${kind}`], message: error });
  else secrets.set(owner, base, value!);
}

/** Resolves every secret reference; problems name the key and the channel. A channel's needs are its kind's. */
export function resolveSecrets(config: DaemonConfig, env: NodeJS.ProcessEnv, kinds: ChannelKinds): { secrets: Secrets; problems: ConfigProblem[] } {
  const secrets = new Secrets();
  const problems: ConfigProblem[] = [];
  const envSecret = (name: string, path: (string | number)[], owner: string, base: string, where: string) => {
    const { value, error } = readSecret('env', name, env, where);
    if (error) problems.push({ path, message: error });
    else secrets.set(owner, base, value!);
  };
  config.channels.forEach((ch, i) => {
    const where = `channel "${ch.id}"`;
    const section = ch as unknown as Record<string, unknown>;
    const { required, optional } = kinds.of(ch).secrets.needs(ch);
    // A kind may offer fewer than the three keys of a secret (only `X_env`): the ones its schema lacks are never set.
    for (const base of required) resolveOne(section, base, true, ['channels', i], `channels.${ch.id}`, where, env, secrets, problems);
    for (const base of optional) resolveOne(section, base, false, ['channels', i], `channels.${ch.id}`, where, env, secrets, problems);
  });
  if (config.http.admin_token_env) envSecret(config.http.admin_token_env, ['http', 'admin_token_env'], 'http', 'admin_token', 'admin token');
  if (config.cluster) {
    const section = config.cluster as unknown as Record<string, unknown>;
    for (const base of ['nats_url', 'postgres_url']) resolveOne(section, base, true, ['cluster'], 'cluster', '[cluster]', env, secrets, problems);
  }
  for (const [name, agent] of Object.entries(config.agents)) {
    if (agent.api_key_env) envSecret(agent.api_key_env, agentPath(config, name, 'api_key_env'), `agents.${name}`, 'api_key', `agent "${name}"`);
  }
  return { secrets, problems };
}

/** Where an agent's key lives in the file: `[agent]` is the agent named "default". */
export function agentPath(config: DaemonConfig, name: string, key: string): (string | number)[] {
  return name === 'default' && config.agent ? ['agent', key] : ['agents', name, key];
}
