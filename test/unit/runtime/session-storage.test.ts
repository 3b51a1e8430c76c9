import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { openDb } from '../../../src/store/db.js';
import { GroupCommit } from '../../../src/store/group-commit.js';
import { SessionStore, whenSessionsWritable } from '../../../src/store/sessions.js';
import { waitFor } from '../../helpers/daemon.js';
import { foreignLock } from '../../helpers/foreign-lock.js';
import { withPipeline, type Pipeline } from '../../helpers/pipeline.js';
import { userMessage } from '../../helpers/recording-adapter.js';

const agent = `[agent]\nprovider = "echo"\necho_delay_ms = 0\n`;

/** The daemon's SQLite stores on a file, so another connection (another process's lock) can take the write lock. */
function onDisk(): { p: Pipeline; sessions: SessionStore; file: string } {
  const dir = mkdtempSync(join(tmpdir(), 'channeld-session-lock-'));
  const file = join(dir, 'channeld.db');
  const db = openDb(file);
  const group = new GroupCommit(db, { retryMs: 20, maxRetryMs: 100 });
  const sessions = new SessionStore(db, group);
  const p = withPipeline(agent, '', { db, sessions });
  onTestFinished(() => {
    group.close();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { p, sessions, file };
}

/**
 * Takes another connection's write lock once, when the turn starts (its message is already
 * stored), and lets it go after `ms`: the session a new conversation needs cannot be created
 * meanwhile.
 */
function lockWhenTheTurnStarts(p: Pipeline, file: string, ms: number): void {
  let taken = false;
  p.workspace.runtime.hooks.register({
    phase: 'pre_dispatch',
    name: 'foreign_lock',
    priority: -1,
    run: () => {
      if (taken) return;
      taken = true;
      const { release } = foreignLock(file);
      const timer = setTimeout(release, ms);
      onTestFinished(() => clearTimeout(timer));
    },
  });
}

async function say(p: Pipeline, text: string, chat: string): Promise<string[]> {
  const before = p.adapter.visible(chat).length;
  await p.dispatcher.deliver(userMessage('t', text, { chat: { id: chat, type: 'dm' } }));
  await waitFor(() => p.adapter.visible(chat).length > before && p.dispatcher.snapshot().inFlight === 0 && p.dispatcher.snapshot().queued === 0, 10_000);
  return p.adapter.visible(chat);
}

describe('a session the store cannot create yet (another process holds the write lock)', () => {
  it('the first turn of a new conversation waits for the store and is answered, not failed', async () => {
    const { p, sessions, file } = onDisk();
    lockWhenTheTurnStarts(p, file, 300);
    expect(await say(p, 'hello while locked', 'c1')).toEqual(['hello while locked']);
    expect(sessions.active('default', 't:c1').turns).toBe(1);
    expect(p.logs.entries().filter((l) => (l.level as number) >= 50)).toEqual([]);
  });

  it('/new waits for the store too and starts the session', async () => {
    const { p, sessions, file } = onDisk();
    await say(p, 'first words', 'c2');
    const before = sessions.active('default', 't:c2');
    lockWhenTheTurnStarts(p, file, 300);
    expect((await say(p, '/new', 'c2')).at(-1)).toBe('Started a new session.');
    expect(sessions.active('default', 't:c2').id).not.toBe(before.id);
  });

  it('/status in a new conversation answers at once, saying no session is stored yet', async () => {
    const { p, file } = onDisk();
    lockWhenTheTurnStarts(p, file, 300);
    const status = (await say(p, '/status', 'c3')).at(-1)!;
    // A lookup, not a write: the same answer whether or not the store takes writes.
    expect(status).toContain('Session: none stored yet');
  });

  it('a wait for the store ends with the abort reason when the turn is cancelled', async () => {
    const { sessions, file } = onDisk();
    foreignLock(file);
    expect(() => sessions.start('default', 't:c4')).toThrow(expect.objectContaining({ code: 'STORAGE_UNAVAILABLE', retryable: true }));
    const stop = new AbortController();
    const waiting = whenSessionsWritable(sessions, stop.signal, () => sessions.active('default', 't:c4'));
    expect(waiting).toBeInstanceOf(Promise);
    const reason = new Error('cancelled by /stop');
    stop.abort(reason);
    await expect(waiting).rejects.toBe(reason);
  });
});
