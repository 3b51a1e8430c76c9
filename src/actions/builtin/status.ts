import { z } from 'zod';
import type { DaemonStatus } from '../../observe/routes.js';
import { defineAction } from '../action.js';

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) => r.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd()).join('\n');
}

/** The daemon's status as the CLI prints it. */
export function formatStatus(s: DaemonStatus): string {
  const head = `channeld ${s.version}  pid ${s.pid}  up ${s.uptime_s}s  generation ${s.generation}  ${s.ready ? 'ready' : 'not ready'}`;
  const rows = [['CHANNEL', 'KIND', 'STATE', 'SINCE', 'ATTEMPTS', 'CONN', 'IN FLIGHT', 'QUEUED', 'LAST ERROR']];
  for (const c of s.channels) {
    const err = c.last_error as { code: string; message: string } | null;
    rows.push([c.id, String(c.kind), c.state, String(c.since), String(c.attempts), String(c.connection), String(c.in_flight), String(c.queued), err ? `${err.code}: ${err.message}` : '-']);
  }
  const agents = s.agents.map((a) => `agent ${a.name}: ${a.provider}${a.model ? ` ${a.model}` : ''}${a.last_served ? `, last served by ${a.last_served}` : ''}${a.cooling.length ? `, cooling: ${a.cooling.map((c) => c.model).join(', ')}` : ''}`);
  const reload = s.last_reload ? `last reload ${s.last_reload.at}: ${s.last_reload.ok ? 'applied' : `refused (${s.last_reload.errors.join('; ')})`}` : 'no reload yet';
  return [head, '', table(rows), '', ...agents, `turns: ${s.turns.in_flight} running, ${s.turns.queued} queued; ${reload}`, ...(s.cluster ? ['', formatCluster(s.cluster)] : [])].join('\n');
}

/** Cluster mode: every instance with its generation, turns and the leases it holds. */
function formatCluster(c: NonNullable<DaemonStatus['cluster']>): string {
  const rows = [['INSTANCE', 'ALIVE', 'GENERATION', 'RUNNING', 'QUEUED', 'LEASES']];
  for (const i of c.instances) {
    const leases = c.leases.filter((l) => l.owner === i.id).map((l) => l.key);
    rows.push([`${i.id}${i.id === c.instance ? ' (this)' : ''}`, i.alive ? 'yes' : 'no', String(i.generation ?? '-'), String(i.in_flight ?? 0), String(i.queued ?? 0), leases.join(', ') || '-']);
  }
  return [`cluster ${c.namespace}: ${c.instances.filter((i) => i.alive).length} instance(s) alive, ${c.partitions.total} partitions, this instance consumes ${c.partitions.owned.length}`, table(rows)].join('\n');
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
  handler: (_input, { api, caller }) => (caller.face === 'slash' ? { conversation: api.conversation(caller.agent, caller.scope) } : (api.status() as unknown as z.input<typeof daemonStatus>)),
  format: (out) =>
    'conversation' in out && !('pid' in out)
      ? Object.entries((out as z.output<typeof conversationStatus>).conversation)
          .map(([k, v]) => `${k}: ${v}`)
          .join('\n')
      : formatStatus(out as unknown as DaemonStatus),
});
