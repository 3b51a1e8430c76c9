import { z } from 'zod';
import type { DaemonStatus } from '../daemon-status.js';
import { defineAction } from '../action.js';
import { CHANNEL_HEADER, channelRow, table } from '../table.js';
import { formatAmount } from '../../util/money.js';

/** The daemon's status as the CLI prints it. */
export function formatStatus(s: DaemonStatus): string {
  const head = `channeld ${s.version}  pid ${s.pid}  up ${s.uptime_s}s  generation ${s.generation}  ${s.ready ? 'ready' : 'not ready'}`;
  const rows = [CHANNEL_HEADER, ...s.channels.map((c) => channelRow(c as Parameters<typeof channelRow>[0]))];
  const notes = s.channels.flatMap((c) => ((c as { notes?: string[] }).notes ?? []).map((n) => `channel ${c.id}: ${n}`));
  const agents = s.agents.map(
    (a) =>
      `agent ${a.name}: ${a.provider}${a.model && a.model !== a.provider ? ` ${a.model}` : ''}${a.last_served ? `, last served by ${a.last_served}` : ''}${a.cooling.length ? `, cooling: ${a.cooling.map((c) => c.model).join(', ')}` : ''}${a.budget ? `, budget today: ${formatAmount(a.budget.left)} of ${formatAmount(a.budget.daily)} left` : ''}`,
  );
  const mcp = (s.mcp_servers ?? []).map(
    (m) =>
      `mcp ${m.agent}/${m.name} (${m.transport}): ${m.state}, ${m.tools} tools${m.last_error ? `, last error ${m.last_error.code}: ${m.last_error.message}` : ''}`,
  );
  const reload = s.last_reload
    ? `last reload ${s.last_reload.at}: ${s.last_reload.ok ? 'applied' : `refused (${s.last_reload.errors.join('; ')})`}`
    : 'no reload yet';
  const storage =
    s.storage?.state === 'degraded'
      ? [`storage: degraded (${s.storage.code}) since ${s.storage.since}: ${s.storage.error}; ${s.storage.pending_writes} write(s) waiting`]
      : [];
  return [
    head,
    ...storage,
    '',
    table(rows),
    '(ATTEMPTS: failed connect attempts since the last success; CONNECTS: connections made since the channel started)',
    ...notes,
    '',
    ...agents,
    ...mcp,
    `turns: ${s.turns.in_flight} running, ${s.turns.queued} queued; ${reload}`,
    ...(s.schedules ?? []).map((x) => `schedule ${x.id} (${x.channel}): next ${x.next_fire_at ?? 'never'}`),
    ...(s.reminders ? [`reminders: ${s.reminders.pending} pending, next ${s.reminders.next_fire_at ?? 'never'}`] : []),
    ...(s.webhooks ?? []).map((w) => `webhook ${w.method} ${w.path}: ${w.scheme} (${w.describe})`),
    ...(s.cluster ? ['', formatCluster(s.cluster)] : []),
  ].join('\n');
}

/** Cluster mode: every instance with its generation, turns and the leases it holds. */
function formatCluster(c: NonNullable<DaemonStatus['cluster']>): string {
  const rows = [['INSTANCE', 'ALIVE', 'GENERATION', 'RUNNING', 'QUEUED', 'LEASES']];
  for (const i of c.instances) {
    const leases = c.leases.filter((l) => l.owner === i.id).map((l) => l.key);
    rows.push([
      `${i.id}${i.id === c.instance ? ' (this)' : ''}`,
      i.alive ? 'yes' : 'no',
      String(i.generation ?? '-'),
      String(i.in_flight ?? 0),
      String(i.queued ?? 0),
      leases.join(', ') || '-',
    ]);
  }
  const waiting = c.waiting_for_channel;
  return [
    `cluster ${c.namespace}: ${c.instances.filter((i) => i.alive).length} instance(s) alive, ${c.partitions.total} partitions, this instance consumes ${c.partitions.owned.length}`,
    ...(waiting?.total
      ? [
          `waiting here for a channel this instance does not run (reload it): ${waiting.total} (${Object.entries(waiting.by_channel)
            .map(([id, n]) => `${id}: ${n}`)
            .join(', ')})`,
        ]
      : []),
    table(rows),
  ].join('\n');
}

const daemonStatus = z.looseObject({
  version: z.string(),
  pid: z.number(),
  generation: z.number(),
  ready: z.boolean(),
  channels: z.array(z.looseObject({ id: z.string(), state: z.string() })),
  turns: z.looseObject({ in_flight: z.number(), queued: z.number() }),
});
const conversationStatus = z.object({ conversation: z.record(z.string(), z.union([z.string(), z.number()])) });

/** Operators see the daemon; a chat user sees their own conversation. */
export const statusAction = defineAction({
  name: 'status',
  description: 'the daemon (operators) or this conversation (chat)',
  input: z.object({}),
  output: z.union([conversationStatus, daemonStatus]),
  readOnly: true,
  httpAliases: ['/status'],
  slash: { help: 'this conversation: agent, model, queue mode, session length' },
  handler: (_input, { api, caller }) =>
    caller.face === 'slash' ? { conversation: api.conversation(caller.agent, caller.scope) } : (api.status() as unknown as z.input<typeof daemonStatus>),
  format: (out) =>
    'conversation' in out && !('pid' in out)
      ? Object.entries((out as z.output<typeof conversationStatus>).conversation)
          .map(([k, v]) => `${k}: ${v}`)
          .join('\n')
      : formatStatus(out as unknown as DaemonStatus),
});
