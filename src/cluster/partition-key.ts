/** FNV-1a, 32 bits: stable across processes and versions, which the partition map needs. */
function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** The partition a conversation scope belongs to: all its messages go to one partition. */
export function partitionOf(scope: string, partitions: number): number {
  return fnv1a(scope) % partitions;
}

/** A scope (or any id) as one NATS subject / KV key token. */
export function scopeToken(text: string): string {
  return Buffer.from(text).toString('base64url');
}
