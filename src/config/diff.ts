import { createHash } from 'node:crypto';
import type { LoadedConfig } from './load.js';
import type { ChannelConfig } from './schema.js';

export interface ChannelDiff {
  added: ChannelConfig[];
  removed: ChannelConfig[];
  changed: ChannelConfig[];
  unchanged: ChannelConfig[];
}

/** A channel's identity for reload: its whole section plus a hash of its resolved secrets. */
function fingerprint(ch: ChannelConfig, loaded: LoadedConfig): string {
  const secrets = loaded.secrets
    .of(`channels.${ch.id}`)
    .map(([base, value]) => `${base}\u0000${value}`)
    .join('\u0000');
  return JSON.stringify(ch) + createHash('sha256').update(secrets).digest('hex');
}

/** Per-channel diff keyed by id; only enabled channels count as present. */
export function diffChannels(before: LoadedConfig, after: LoadedConfig): ChannelDiff {
  const enabled = (l: LoadedConfig) => new Map(l.config.channels.filter((c) => c.enabled).map((c) => [c.id, c]));
  const a = enabled(before);
  const b = enabled(after);
  const diff: ChannelDiff = { added: [], removed: [], changed: [], unchanged: [] };
  for (const [id, ch] of a) if (!b.has(id)) diff.removed.push(ch);
  for (const [id, ch] of b) {
    const old = a.get(id);
    if (!old) diff.added.push(ch);
    else if (fingerprint(old, before) !== fingerprint(ch, after)) diff.changed.push(ch);
    else diff.unchanged.push(ch);
  }
  return diff;
}
