import { readFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import type { ChannelKinds } from '../config/kinds.js';
import { loadConfig, type LoadedConfig } from '../config/load.js';
import { ConfigError } from '../contracts/errors.js';
import { loadPluginFolders } from '../daemon/plugin-folders.js';
import { configWarnings } from './check-warnings.js';

/** Which environment the secrets were resolved in: the caller's shell is not the daemon's. */
function environmentNote(): string {
  let user: string;
  try {
    user = userInfo().username;
  } catch {
    user = `uid ${process.getuid?.() ?? '?'}`;
  }
  const creds = process.env.CREDENTIALS_DIRECTORY ? `$CREDENTIALS_DIRECTORY=${process.env.CREDENTIALS_DIRECTORY}` : '$CREDENTIALS_DIRECTORY unset';
  return `secrets were resolved in this shell's environment (user ${user}, ${creds}); the running daemon resolves them in its own: \`channeld check --against-daemon\` asks it`;
}

/**
 * `channeld check`: prints "ok" or every problem (file contents, cross-key rules and
 * secrets in one run), then which environment the secrets were resolved in. Returns 78
 * for an invalid config; throws only for an unreadable file (main maps that to 78 too).
 */
export async function runCheck(file: string, kinds: ChannelKinds): Promise<number> {
  let config: LoadedConfig['config'];
  let loaded: LoadedConfig;
  try {
    loaded = loadConfig(file, kinds);
    ({ config } = loaded);
    // Plugin folders are imported as the daemon would: a missing one or a bad export fails here too.
    await loadPluginFolders(loaded);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    console.error(err.problems.join('\n'));
    if (!err.problems.some((p) => p.includes(': syntax: '))) console.error(`(${environmentNote()})`);
    return 78;
  }
  for (const w of configWarnings(loaded, readFileSync(file, 'utf8'))) console.error(w);
  const channels = config.channels.filter((c) => c.enabled).map((c) => `${c.id} (${c.type})`);
  if (channels.length === 0)
    console.error(
      `warning: ${file} has no enabled channels: the daemon would start with nothing to listen on, and a running daemon refuses to reload to this file`,
    );
  const plugins = config.daemon.plugins.length ? `; plugin folders: ${config.daemon.plugins.join(', ')}` : '';
  console.log(`ok: ${channels.length} channel(s): ${channels.join(', ') || 'none'}; agents: ${Object.keys(config.agents).join(', ')}${plugins}`);
  console.log(`(${environmentNote()})`);
  return 0;
}
