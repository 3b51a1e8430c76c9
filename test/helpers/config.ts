import { parseConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/contracts/errors.js';
import { kinds } from './kinds.js';

/** The problems `parseConfig` reports for `source` as file `file` ([] when it is valid); any other error is thrown. */
export function configProblems(source: string, file = 'daemon.config.toml', env: NodeJS.ProcessEnv = {}): string[] {
  try {
    parseConfig(source, file, kinds, env);
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
  return [];
}
