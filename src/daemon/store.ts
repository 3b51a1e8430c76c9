import { join } from 'node:path';
import { CodedError, errorMessage } from '../contracts/errors.js';
import { agentOf } from '../config/load.js';
import { defineComponent, type DaemonComponent } from './services.js';
import { ApprovalStore } from '../store/approvals.js';
import { ConversationStore } from '../store/conversations.js';
import { openDb } from '../store/db.js';
import { GroupCommit } from '../store/group-commit.js';
import { StorageHealth } from '../store/health.js';
import { Inbox } from '../store/inbox.js';
import { SessionStore } from '../store/sessions.js';
import { readTurnStartsAlongside } from '../store/turn-reads.js';
import { SqliteMemoryStore } from '../store/memories.js';
import { ReminderStore } from '../store/reminders.js';
import { SqliteUsageLedger } from '../store/usage-ledger.js';
import { LocalReservations } from '../store/reservations.js';
import { SqliteMinuteStore } from '../store/minutes.js';
import { SqliteSettledWindows } from '../store/spend-windows.js';

/** The state database; a state_dir that cannot hold it is named with its path and what failed. */
function openStateDb(dir: string): ReturnType<typeof openDb> {
  const file = join(dir, 'channeld.db');
  try {
    return openDb(file);
  } catch (err) {
    // The store's own refusals (a file in the way, a newer or damaged database) say it already.
    if (err instanceof CodedError) throw err;
    const code = (err as NodeJS.ErrnoException).code ?? errorMessage(err);
    throw new CodedError('STATE_DIR_UNUSABLE', `daemon.state_dir = "${dir}": cannot create or write ${file} (${code})`, { cause: err });
  }
}

/**
 * The SQLite store: the durable inbox, sessions and conversation preferences in one WAL
 * database, with usage and tool-approval decisions beside them. In cluster mode (`localOnly`)
 * the shared inbox and all state (usage and approval decisions too) live in NATS and
 * PostgreSQL, and this database only backs the instance's storage health.
 */
export function sqliteStoreComponent(localOnly = false): DaemonComponent {
  return defineComponent({
    name: localOnly ? 'local-store' : 'store',
    provides: localOnly
      ? ['storage', 'inbox']
      : ['inbox', 'sessions', 'conversations', 'storage', 'usage', 'approval-store', 'spend', 'memories', 'minutes', 'reminders'],
    inject: ['config', 'logger', 'metrics'],
    start: (ctx) => {
      const config = ctx.use('config');
      const log = ctx.use('logger');
      const metrics = ctx.use('metrics');
      const db = openStateDb(config.config.daemon.state_dir);
      const health = new StorageHealth(log, (degraded, code) => {
        metrics.storageDegraded.set(degraded ? 1 : 0);
        if (code) metrics.storageFaults.inc({ code });
      });
      const group = new GroupCommit(db, { health, onDropped: (err) => log.error({ err }, 'a store write failed and was dropped') });
      ctx.effect(() => {
        const lost = group.close();
        // Their items stay pending or running in the inbox, so the next start runs them again.
        if (lost)
          log.error({ writes: lost, code: health.code }, 'the database still refused writes at shutdown; their turns will run again after the next start');
        db.close();
      });
      const inbox = new Inbox(db, group);
      const prune = () => {
        const n = inbox.tryPrune(config.config.daemon.inbox_retention_hours);
        if (n) log.info({ pruned: n }, 'pruned old inbox items');
      };
      prune();
      const timer = setInterval(prune, 3_600_000);
      timer.unref();
      ctx.effect(() => clearInterval(timer));
      ctx.provide('storage', group);
      ctx.provide('inbox', inbox);
      if (localOnly) return;
      const sessions = new SessionStore(db, group);
      const conversations = new ConversationStore(db, group);
      readTurnStartsAlongside(inbox, { sessions, conversations }, (channelId) => agentOf(config.config, channelId));
      ctx.provide('sessions', sessions);
      ctx.provide('conversations', conversations);
      ctx.provide('usage', new SqliteUsageLedger(db, group));
      ctx.provide('approval-store', new ApprovalStore(db));
      ctx.provide('spend', new LocalReservations(new SqliteSettledWindows(db, group)));
      ctx.provide('memories', new SqliteMemoryStore(db));
      ctx.provide('minutes', new SqliteMinuteStore(db, group));
      ctx.provide('reminders', new ReminderStore(db));
    },
  });
}
