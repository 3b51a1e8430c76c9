/** Rows as aligned columns; the first row is the header. */
export function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/**
 * The channel columns `status` and `channels` share. CONNECTS counts the platform
 * connections made since the channel started (it goes up on every reconnect);
 * ATTEMPTS counts failed connect attempts since the last success.
 */
export const CHANNEL_HEADER = ['CHANNEL', 'KIND', 'STATE', 'SINCE', 'ATTEMPTS', 'CONNECTS', 'IN FLIGHT', 'QUEUED', 'LAST ERROR'];

export function channelRow(c: {
  id: string;
  kind: unknown;
  state: string;
  since: unknown;
  attempts: unknown;
  connection: unknown;
  in_flight?: unknown;
  queued?: unknown;
  last_error: unknown;
}): string[] {
  const err = c.last_error as { code: string; message: string } | null;
  return [
    c.id,
    String(c.kind),
    c.state,
    String(c.since),
    String(c.attempts),
    String(c.connection),
    String(c.in_flight ?? 0),
    String(c.queued ?? 0),
    err ? `${err.code}: ${err.message}` : '-',
  ];
}
