import { loadConfig } from '../config/load.js';

/** `channeld check`: prints "ok" or throws the ConfigError main turns into exit 78. */
export async function runCheck(file: string): Promise<number> {
  const { config } = loadConfig(file);
  const channels = config.channels.filter((c) => c.enabled).map((c) => `${c.id} (${c.type})`);
  console.log(`ok: ${channels.length} channel(s): ${channels.join(', ') || 'none'}; agents: ${Object.keys(config.agents).join(', ')}`);
  // The running daemon refuses such a file on reload; say so before the operator tries.
  if (!channels.length) console.log('note: no channel is enabled: the daemon starts but answers no one, and a running daemon refuses to reload to this file');
  return 0;
}
