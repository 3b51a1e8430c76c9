import { loadConfig } from '../config/load.js';

/** `channeld check`: prints "ok" or throws the ConfigError main turns into exit 78. */
export async function runCheck(file: string): Promise<number> {
  const { config } = loadConfig(file);
  const channels = config.channels.filter((c) => c.enabled).map((c) => `${c.id} (${c.type})`);
  console.log(`ok: ${channels.length} channel(s): ${channels.join(', ') || 'none'}; agents: ${Object.keys(config.agents).join(', ')}`);
  return 0;
}
