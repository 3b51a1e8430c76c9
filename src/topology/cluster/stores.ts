import type { DaemonConfig } from '../../config/schema.js';
import type { Secrets } from '../../config/secrets.js';
import type { PgApprovalStore } from '../../cluster/pg-approvals.js';
import type { PgMemoryStore } from '../../cluster/pg-memories.js';
import type { PgMinuteStore } from '../../cluster/pg-minutes.js';
import type { PgReminderStore } from '../../cluster/pg-reminders.js';
import type { PgReservations } from '../../cluster/pg-reservations.js';
import type { PgConversationStore, PgSessionStore } from '../../cluster/pg-state.js';
import type { PgUsageLedger } from '../../cluster/pg-usage.js';

/** The live config as the cluster reads it (src/daemon/config-service.ts provides it). */
export interface ClusterConfigView {
  readonly config: DaemonConfig;
  readonly secrets: Secrets;
  readonly generation: number;
}

/** The state stores the cluster shares through PostgreSQL (the daemon provides them as its services). */
export interface ClusterStores {
  sessions: PgSessionStore;
  conversations: PgConversationStore;
  usage: PgUsageLedger;
  approvals: PgApprovalStore;
  spend: PgReservations;
  memories: PgMemoryStore;
  minutes: PgMinuteStore;
  reminders: PgReminderStore;
}
