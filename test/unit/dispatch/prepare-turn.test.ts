import { describe, expect, it } from 'vitest';
import { CodedError } from '../../../src/contracts/errors.js';
import { prepareTurn } from '../../../src/dispatch/prepare-turn.js';
import { quietLogger } from '../../helpers/cluster.js';

/** A PostgreSQL failure as PgWriter.read raises it: CLUSTER_UNAVAILABLE, retryable, pg's error as the cause. */
const pgFailure = (cause: object) => new CodedError('CLUSTER_UNAVAILABLE', 'PostgreSQL: failed', { cause });

describe('prepareTurn: waiting out a store that cannot answer, and only that', () => {
  it('retries a lost connection until the store answers', async () => {
    let calls = 0;
    const ready = await prepareTurn(
      async () => {
        // A socket's errno code (five letters, like a SQLSTATE) is no answer from PostgreSQL.
        if (++calls < 3) throw pgFailure(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }));
      },
      new AbortController().signal,
      quietLogger().log,
      's',
    );
    expect([ready, calls]).toEqual([true, 3]);
  });

  it('a query PostgreSQL refuses for good (a missing table) is not waited on: it rejects at once', async () => {
    let calls = 0;
    const refused = pgFailure(Object.assign(new Error('relation "sessions" does not exist'), { code: '42P01', severity: 'ERROR' }));
    await expect(
      prepareTurn(
        async () => {
          calls++;
          throw refused;
        },
        new AbortController().signal,
        quietLogger().log,
        's',
      ),
    ).rejects.toBe(refused);
    expect(calls).toBe(1);
  });

  it('a stop while it waits, or while the read that then succeeds is in flight, is false', async () => {
    const stop = new AbortController();
    const waiting = prepareTurn(
      async () => {
        throw pgFailure(Object.assign(new Error('the database system is starting up'), { code: '57P03', severity: 'FATAL' }));
      },
      stop.signal,
      quietLogger().log,
      's',
    );
    stop.abort();
    expect(await waiting).toBe(false);
    const late = new AbortController();
    expect(await prepareTurn(async () => void late.abort(), late.signal, quietLogger().log, 's')).toBe(false);
  });
});
