import type pg from 'pg';

/**
 * A client out of the pool, listened to: a connection that ends while a client is out (a
 * PostgreSQL restart, a cut network) is told as an 'error' event on the client, which without
 * a listener is an uncaught exception that ends the process. Its query fails as well, which is
 * what the caller handles. `release` (once; again is a no-op) gives it back, or drops it when
 * its connection broke or when given the error that leaves it in doubt (a timeout).
 */
export async function checkOut(pool: pg.Pool): Promise<{ client: pg.PoolClient; release(drop?: unknown): void }> {
  const client = await pool.connect();
  let broken: Error | undefined;
  const lost = (err: Error) => void (broken ??= err);
  client.on('error', lost);
  let released = false;
  return {
    client,
    release: (drop?: unknown) => {
      if (released) return;
      released = true;
      client.off('error', lost);
      client.release(broken ?? (drop instanceof Error ? drop : undefined));
    },
  };
}
