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

  // A turn that ended just before the freeze had its final state queued in the group commit
  // (flushed on the next tick). The new process reads the inbox as soon as it is told the old
  // one froze: the item looked unfinished there, and was answered a second time (seen in
  // test/e2e/upgrade-overlap.test.ts under CI's CPU burner).
  it('commits what the ended turns wrote before the new process reads the inbox', () => {
    const dir = mkdtempSync(join(tmpdir(), 'channeld-freeze-'));
    dirs.push(dir);
    const file = join(dir, 'channeld.db');
    const db = openDb(file);
    const group = new GroupCommit(db);
    const inbox = new Inbox(db, group);
    const id = inbox.add(userMessage('sl', 'at the hand-over'), 'sl:D1')!;
    group.flush();
    // The turn ran and ended: its final state is queued, not yet committed.
    inbox.setState(id, 'done');
    const busy = freezeFor({ freeze: () => [] }, group)();
    expect(busy).toEqual([]);
    // The new process, on the same file, as it reads the inbox after the freeze.
    const other = openDb(file);
    try {
      expect(new Inbox(other).unfinished().map((i) => i.id)).toEqual([]);
    } finally {
      other.close();
      group.close();
      db.close();
    }
  });
});
