import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freezeFor } from '../../../src/daemon/upgrade/service.js';
import { openDb } from '../../../src/store/db.js';
import { GroupCommit } from '../../../src/store/group-commit.js';
import { Inbox } from '../../../src/store/inbox.js';
import { userMessage } from '../../helpers/recording-adapter.js';

describe('upgrade: the old process freezes', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  /** This process's store, and a second connection on the same file: the new process's. */
  function stores() {
    const dir = mkdtempSync(join(tmpdir(), 'channeld-freeze-'));
    dirs.push(dir);
    const file = join(dir, 'channeld.db');
    const db = openDb(file);
    const group = new GroupCommit(db);
    return { db, group, inbox: new Inbox(db, group), other: () => openDb(file) };
  }

  // A turn that ended just before the freeze had its final state queued in the group commit
  // (flushed on the next tick). The new process reads the inbox as soon as it is told the old
  // one froze: the item looked unfinished there, and was answered a second time (seen in
  // test/e2e/upgrade-overlap.test.ts under CI's CPU burner).
  it('commits what the ended turns wrote before the new process reads the inbox', () => {
    const { db, group, inbox, other: open } = stores();
    const id = inbox.add(userMessage('sl', 'at the hand-over'), 'sl:D1')!;
    group.flush();
    // The turn ran and ended: its final state is queued, not yet committed.
    inbox.setState(id, 'done');
    const busy = freezeFor({ freeze: () => [] }, group, inbox)();
    expect(busy).toEqual([]);
    // The new process, on the same file, as it reads the inbox after the freeze.
    const other = open();
    try {
      expect(new Inbox(other).unfinished().map((i) => i.id)).toEqual([]);
    } finally {
      other.close();
      group.close();
      db.close();
    }
  });

  // The commit at the freeze can fail: the new process holds the write lock past the 10 ms
  // busy_timeout while it stores what arrives, and the group commit keeps the writes queued.
  // `frozen` went out anyway, the ended turn read unfinished and its conversation was not
  // busy: the new process answered it again.
  it('a commit that fails at the freeze: the conversations with unfinished items are listed busy', () => {
    const { db, group, inbox, other: open } = stores();
    const ended = inbox.add(userMessage('sl', 'at the hand-over'), 'sl:D1')!;
    inbox.add(userMessage('sl', 'queued here'), 'sl:D2');
    group.flush();
    inbox.setState(ended, 'done');
    // The new process is storing a message it received at this moment.
    const other = open();
    try {
      other.exec('BEGIN IMMEDIATE');
      const busy = freezeFor({ freeze: () => ['sl:D3'] }, group, inbox)();
      other.exec('COMMIT');
      expect(new Inbox(other).unfinished().map((i) => i.id)).toContain(ended);
      expect(busy.sort()).toEqual(['sl:D1', 'sl:D2', 'sl:D3']);
      // This process's stop commits it (its store's close), before it sends `done`.
      expect(group.close()).toBe(0);
      expect(new Inbox(other).unfinished().map((i) => i.id)).not.toContain(ended);
    } finally {
      other.close();
      group.close();
      db.close();
    }
  });
});
