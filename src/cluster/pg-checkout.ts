import pg from 'pg';

/**
 * A client out of the pool, listened to: a connection that ends while a client is out (a
 * PostgreSQL restart, a cut network) is told as an 'error' event on the client, which without
 * a listener is an uncaught exception that ends the process. Its query fails as well, which is
 * what the caller handles. `release` (once; again is a no-op) gives it back, or drops it when
 * its connection broke or when given the error that leaves it in doubt (a timeout).
 */
export interface CheckedOut {
  client: pg.PoolClient;
  release(drop?: unknown): void;
  /**
   * Ends a transaction that failed with `err`: rolled back and given back where PostgreSQL
   * answered the failure; dropped where it did not (a cut, a timeout: its statement may still
   * run on the server, and a ROLLBACK would only queue behind it).
   */
  abandon(err: unknown): Promise<void>;
}

export async function checkOut(pool: pg.Pool): Promise<CheckedOut> {
  const client = await pool.connect();
  let broken: Error | undefined;
  const lost = (err: Error) => void (broken ??= err);
  client.on('error', lost);
  let released = false;
  const release = (drop?: unknown) => {
    if (released) return;
    released = true;
    client.off('error', lost);
    client.release(broken ?? (drop === undefined ? undefined : drop instanceof Error ? drop : new Error(String(drop))));
  };
  return {
    client,
    release,
    abandon: async (err) => {
      if (released) return;
      const clean =
        err instanceof pg.DatabaseError &&
        (await client.query('ROLLBACK').then(
          () => true,
          () => false,
        ));
      release(clean ? undefined : err);
    },
  };
}
