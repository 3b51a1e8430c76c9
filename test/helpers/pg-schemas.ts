import pg from 'pg';
import { afterAll } from 'vitest';
import { migrate } from '../../src/cluster/migrations.js';
import { PG_URL, uniqueNamespace } from './cluster.js';

/**
 * PostgreSQL pools for a store contract test: each on a migrated schema of its own, so tests
 * never see each other's rows; every schema is dropped and every pool ended after the file.
 */
export function migratedPools(): (max: number) => Promise<pg.Pool> {
  const pools: Array<{ pool: pg.Pool; schema: string }> = [];
  afterAll(async () => {
    for (const { pool, schema } of pools) {
      await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await pool.end();
    }
  });
  return async (max) => {
    const schema = uniqueNamespace();
    const pool = new pg.Pool({ connectionString: PG_URL, options: `-c search_path=${schema}`, max });
    pools.push({ pool, schema });
    await migrate(pool, schema);
    return pool;
  };
}
