import type { ChannelKinds } from './kinds.js';
import { agentSchema, backoffSchema, configSchema } from './schema.js';

/** Edit distance, for "did you mean" on unknown keys. */
function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const cur = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = cur;
    }
  }
  return row[b.length]!;
}

const sectionKeys = (s: unknown) => Object.keys((s as { unwrap(): { shape: object } }).unwrap().shape);

/** The keys the schema allows in the table at `path` (`raw` tells a channel's type, `kinds` its keys). */
export function allowedKeys(path: readonly (string | number)[], raw: unknown, kinds: ChannelKinds): string[] {
  const [head, second, third] = path;
  if (path.length === 0) return Object.keys(configSchema.shape);
  if (path.length === 1 && (head === 'daemon' || head === 'http' || head === 'limits')) return sectionKeys(configSchema.shape[head]);
  if ((head === 'agent' && path.length === 1) || (head === 'agents' && path.length === 2)) return Object.keys(agentSchema.shape);
  if (head === 'channels' && typeof second === 'number') {
    if (third === 'backoff') return Object.keys(backoffSchema.shape);
    const type = (raw as { channels?: Array<{ type?: unknown }> }).channels?.[second]?.type;
    return kinds.tableKeys(type);
  }
  return [];
}

/** The closest allowed key, when it is close enough to be a typo. */
export function didYouMean(key: string, allowed: readonly string[]): string | undefined {
  let best: { k: string; d: number } | undefined;
  for (const k of allowed) {
    const d = distance(key.toLowerCase(), k);
    if (!best || d < best.d) best = { k, d };
  }
  return best && best.d <= Math.max(2, Math.floor(key.length / 3)) ? best.k : undefined;
}
