import { quotaTop } from '../quotas/top.js';
import type { ManagementApi } from '../actions/action.js';
import { agentOf } from '../config/load.js';
import { withRunning } from '../workspace/live-usage.js';
import { CodedError } from '../contracts/errors.js';
import { defineComponent, type ManagementBinding } from './services.js';

/**
 * The `management` service: the ManagementApi the action registry runs against. It
 * forwards to the implementation the management component binds; before that (or after it
 * unloads) a call fails with MANAGEMENT_UNBOUND rather than reaching half a daemon.
 */
export class ManagementSlot implements ManagementBinding {
  #api: ManagementApi | undefined;
  #upgrade: ManagementApi['upgrade'];

  bindUpgrade(upgrade: NonNullable<ManagementApi['upgrade']>): () => void {
    this.#upgrade = upgrade;
    return () => {
      if (this.#upgrade === upgrade) this.#upgrade = undefined;
    };
  }

  bind(api: ManagementApi): () => void {
    this.#api = api;
    return () => {
      if (this.#api === api) this.#api = undefined;
    };
  }

  get #target(): ManagementApi {
    if (!this.#api) throw new CodedError('MANAGEMENT_UNBOUND', 'the daemon is not serving management actions right now');
    return this.#api;
  }

  status: ManagementApi['status'] = () => this.#target.status();
  reload: ManagementApi['reload'] = (options) => this.#target.reload(options);
  turns: ManagementApi['turns'] = () => this.#target.turns();
  stopTurn: ManagementApi['stopTurn'] = (id) => this.#target.stopTurn(id);
  sessions: ManagementApi['sessions'] = () => this.#target.sessions();
  conversation: ManagementApi['conversation'] = (agent, scope) => this.#target.conversation(agent, scope);
  usage: ManagementApi['usage'] = (filter) => this.#target.usage(filter);
  budget: ManagementApi['budget'] = (agent) => this.#target.budget(agent);
  quotaStanding: ManagementApi['quotaStanding'] = (agent, channelId, senderId) => this.#target.quotaStanding(agent, channelId, senderId);
  quotaTop: ManagementApi['quotaTop'] = (limit) => this.#target.quotaTop(limit);
  charts: ManagementApi['charts'] = (minutes) => this.#target.charts(minutes);
  upgrade: NonNullable<ManagementApi['upgrade']> = (options) => {
    if (!this.#upgrade) throw new CodedError('MANAGEMENT_UNBOUND', 'the daemon is not serving upgrades right now');
    return this.#upgrade(options);
  };
}

/** What management actions ask of the daemon, answered from the services. */
export const managementComponent = defineComponent({
  name: 'management-api',
  inject: ['management', 'status', 'reload', 'tracker', 'dispatcher', 'sessions', 'workspaces', 'usage', 'config', 'topology', 'mcp', 'spend', 'charts'],
  start: (ctx) => {
    const config = ctx.use('config');
    const status = ctx.use('status');
    const reload = ctx.use('reload');
    const tracker = ctx.use('tracker');
    const dispatcher = ctx.use('dispatcher');
    const sessions = ctx.use('sessions');
    const workspaces = ctx.use('workspaces');
    const ledger = ctx.use('usage');
    const topology = ctx.use('topology');
    const mcp = ctx.use('mcp');
    const api: ManagementApi = {
      status: () => status.status(),
      reload: (options) => reload.reload(options),
      turns: () => tracker.list(),
      stopTurn: (id) => topology.controls.stopTurn(id, () => dispatcher.stopTurn(id)),
      sessions: () =>
        Promise.all(
          config.config.channels.map(async (c) => {
            const agent = agentOf(config.config, c.id);
            const rows = await sessions.summary(agent, `${c.id}:`);
            const last = Math.max(0, ...rows.map((r) => r.lastActiveAt));
            return {
              channel: c.id,
              agent,
              conversations: rows.length,
              sessions: rows.reduce((n, r) => n + r.sessions, 0),
              last_activity: last ? new Date(last).toISOString() : null,
            };
          }),
        ),
      conversation: (agent, scope) => {
        const status = workspaces.byName.get(agent)?.conversationStatus(scope);
        if (!status) return { Agent: `${agent} (not running)` };
        // The agent's MCP servers, so a user whose tool fails can see that its server is down.
        const servers = mcp.status().filter((m) => m.agent === agent);
        if (servers.length) status['Tool servers'] = servers.map((m) => `${m.name} (${m.state}, ${m.tools} tools)`).join(', ');
        return status;
      },
      // Turns still running here count with the model steps they reported so far.
      usage: async (filter) => {
        const [rows, total] = await Promise.all([ledger.breakdown(filter), ledger.totals(filter)]);
        return withRunning({ rows, total }, workspaces.live.breakdown(filter));
      },
      budget: (agent) => workspaces.byName.get(agent)?.budget(),
      quotaStanding: async (agent, channelId, senderId) => (await workspaces.byName.get(agent)?.quotaStanding(channelId, senderId)) ?? [],
      quotaTop: (limit) => quotaTop(ctx.use('spend'), limit),
      charts: (minutes) => ctx.use('charts').report(minutes),
    };
    ctx.effect(ctx.use('management').bind(api));
  },
});
