import { describe, expect, it } from 'vitest';
import { PgMemoryStore } from '../../src/cluster/pg-memories.js';
import { PgWriter } from '../../src/cluster/pg-writer.js';
import { CodedError } from '../../src/contracts/errors.js';
import { openDb } from '../../src/store/db.js';
import { MAX_MEMORIES_PER_USER, MAX_MEMORY_CHARS, SqliteMemoryStore, type Memories } from '../../src/store/memories.js';
import { clusterSkipReason, quietLogger } from '../helpers/cluster.js';
import { migratedPools } from '../helpers/pg-schemas.js';

const codeOf = (p: Promise<unknown>) =>
  p.then(
    () => 'resolved',
    (err: unknown) => (err instanceof CodedError ? err.code : String(err)),
  );

/** The same tests for both backends: what the memory commands, tool and recall rely on. */
function contract(name: string, open: () => Promise<Memories>) {
  describe(`memory store contract: ${name}`, () => {
    it('keeps, lists, searches and forgets per agent and user; one user never sees another’s', async () => {
      const m = await open();
      const teal = await m.add('a', 'tg:42', '  my favourite colour is teal ');
      await m.add('a', 'tg:42', 'I have a dog called Rex');
      await m.add('a', 'tg:43', 'my favourite colour is red');
      await m.add('b', 'tg:42', 'agent b knows I like jazz');
      expect(teal.text).toBe('my favourite colour is teal');
      expect((await m.list('a', 'tg:42')).map((r) => r.text)).toEqual(['my favourite colour is teal', 'I have a dog called Rex']);
      expect((await m.search('a', 'tg:42', 'Which COLOUR for the door?', 10)).map((r) => r.text)).toEqual(['my favourite colour is teal']);
      expect((await m.search('a', 'tg:43', 'which colour', 10)).map((r) => r.text)).toEqual(['my favourite colour is red']);
      expect(await m.search('a', 'tg:42', 'jazz', 10)).toEqual([]);
      expect((await m.recent('a', 'tg:42', 1)).map((r) => r.text)).toEqual(['I have a dog called Rex']);
      // Another user's id is not theirs to forget.
      expect(await m.forget('a', 'tg:43', teal.id)).toBe(false);
      expect(await m.forget('a', 'tg:42', teal.id)).toBe(true);
      expect((await m.search('a', 'tg:42', 'colour', 10)).length).toBe(0);
      expect(await m.forgetAll('a', 'tg:42')).toBe(1);
      expect(await m.list('a', 'tg:42')).toEqual([]);
      expect((await m.list('a', 'tg:43')).length).toBe(1);
      expect((await m.list('b', 'tg:42')).length).toBe(1);
    });

    it('keeps an embedding per memory for its owner only, and drops it with the memory', async () => {
      const m = await open();
      const teal = await m.add('a', 'u', 'teal');
      const rex = await m.add('a', 'u', 'Rex');
      await m.setVector('a', 'u', teal.id, [0.5, -1, 2]);
      // Another user's (or agent's) id is not theirs to set.
      await m.setVector('a', 'v', rex.id, [9]);
      await m.setVector('b', 'u', rex.id, [9]);
      expect((await m.withVectors('a', 'u')).map((r) => [r.text, r.vector])).toEqual([
        ['teal', [0.5, -1, 2]],
        ['Rex', undefined],
      ]);
      await m.setVector('a', 'u', teal.id, [1, 1, 1]);
      expect((await m.withVectors('a', 'u'))[0]!.vector).toEqual([1, 1, 1]);
      expect(await m.forget('a', 'u', teal.id)).toBe(true);
      const again = await m.add('a', 'u', 'teal again');
      expect((await m.withVectors('a', 'u')).map((r) => [r.id, r.vector])).toEqual([
        [rex.id, undefined],
        [again.id, undefined],
      ]);
    });

    it('a message with full-text syntax in it is searched as plain words', async () => {
      const m = await open();
      await m.add('a', 'u', 'the code word is NEAR the "door"');
      for (const q of ['"', 'NEAR(door) *', 'text: AND OR NOT (', '-door & !x | y:*', "'; DROP TABLE memories; --", '…', ''])
        await expect(m.search('a', 'u', q, 10)).resolves.toBeInstanceOf(Array);
      expect((await m.search('a', 'u', 'door"*', 10)).length).toBe(1);
      await m.add('a', 'u', 'Meine Lieblingsstadt ist Köln, mon café préféré');
      expect((await m.search('a', 'u', 'köln CAFÉ', 10)).map((r) => r.text)).toEqual(['Meine Lieblingsstadt ist Köln, mon café préféré']);
      // The same words kept by another user or agent are not found for this one.
      await m.add('b', 'u', 'köln');
      await m.add('a', 'v', 'köln');
      expect((await m.search('a', 'u', 'köln', 10)).length).toBe(1);
    });

    it('refuses an empty or too long memory, and more than the bound per user', async () => {
      const m = await open();
      expect(await codeOf(m.add('a', 'u', '   '))).toBe('MEMORY_EMPTY');
      expect(await codeOf(m.add('a', 'u', 'x'.repeat(MAX_MEMORY_CHARS + 1)))).toBe('MEMORY_TOO_LONG');
      await m.add('a', 'u', 'x'.repeat(MAX_MEMORY_CHARS));
      for (let i = 1; i < MAX_MEMORIES_PER_USER; i++) await m.add('a', 'u', `fact ${i}`);
      expect(await codeOf(m.add('a', 'u', 'one too many'))).toBe('MEMORY_FULL');
      // The bound is per user.
      await expect(m.add('a', 'v', 'fine')).resolves.toMatchObject({ text: 'fine' });
      expect((await m.list('a', 'u')).length).toBe(MAX_MEMORIES_PER_USER);
    });
  });
}

contract('SQLite', async () => new SqliteMemoryStore(openDb(':memory:')));

const skip = await clusterSkipReason();
const pgPool = migratedPools();
if (skip === undefined) {
  contract('PostgreSQL', async () => {
    const pool = await pgPool(2);
    return new PgMemoryStore(new PgWriter(pool, quietLogger().log));
  });
} else {
  describe.skip(`memory store contract: PostgreSQL (skipped: ${skip})`, () => {
    it('needs PostgreSQL', () => {});
  });
}
