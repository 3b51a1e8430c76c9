import { workspaceDirOf } from '../config/load.js';
import type { AgentConfig } from '../config/schema.js';
import { channelOfScope } from '../contracts/message.js';
import { Workspace } from '../workspace/workspace.js';
import { resolveQueueMode } from '../dispatch/queue-mode.js';
import { resolveQuotas } from '../quotas/limits.js';
import { LiveUsage } from '../workspace/live-usage.js';
import { defineComponent, type DaemonComponent, type WorkspaceTable } from './services.js';

/** How long a turn waits for its agent's MCP servers' first connection attempt. */
const MCP_READY_WAIT_MS = 30_000;

/** The workspace table, and how a workspace is built from the live config and the services. */
export const workspacesComponent = defineComponent({
  name: 'workspaces',
  provides: ['workspaces'],
  inject: ['config', 'logger', 'sessions', 'conversations', 'metrics', 'actions', 'tracker', 'usage', 'spend', 'memories', 'mcp', 'tool-calls'],
  start: (ctx) => {
    const config = ctx.use('config');
    const log = ctx.use('logger');
    const metrics = ctx.use('metrics');
    const mcp = ctx.use('mcp');
    const tracker = ctx.use('tracker');
    const calls = ctx.use('tool-calls');
    const live = new LiveUsage(() => config.config.models);
    const deps = { sessions: ctx.use('sessions'), conversations: ctx.use('conversations'), actions: ctx.use('actions'), ledger: ctx.use('usage') };
    const build = (name: string, agent: AgentConfig) => {
      const apiKey = config.secrets.get(`agents.${name}`, 'api_key');
      return new Workspace({
        name,
        config: agent,
        workspaceDir: workspaceDirOf(config.config, name),
        log,
        actions: deps.actions,
        extraTools: () => mcp.tools(name),
        toolsReady: (signal) => mcp.ready(name, MCP_READY_WAIT_MS, signal),
        wrapTool: (t) => calls.wrap(name, t),
        ...(apiKey ? { apiKey } : {}),
        queuedIn: (scope) => tracker.queuedIn(scope),
        observeTurn: (outcome, seconds) => metrics.turnRuntime.observe({ agent: name, outcome }, seconds),
        onServed: (a, model) => metrics.modelTurns.inc({ agent: a, model }),
        onToolCallInvalid: (a, tool, repaired) => metrics.toolCallsInvalid.inc({ agent: a, tool, outcome: repaired ? 'repaired' : 'returned' }),
        onFailover: (a, model) => {
          metrics.failovers.inc({ agent: a, model });
          log.warn({ agent: a, model }, 'model failed before any text; trying the next one');
        },
        sessions: deps.sessions,
        conversations: deps.conversations,
        memories: ctx.use('memories'),
        models: () => config.config.models,
        maxAttachmentBytes: () => config.config.limits.max_attachment_bytes,
        attachmentTimeoutMs: () => config.config.limits.attachment_timeout_ms,
        usage: {
          ledger: deps.ledger,
          spend: ctx.use('spend'),
          live,
          onRecorded: (r) => metrics.recordUsage(r),
        },
        quotas: {
          channel: (channelId) => {
            const cfg = config.config;
            const channel = cfg.channels.find((c) => c.id === channelId);
            return { quotas: resolveQuotas(cfg.limits, agent, channel), admins: channel?.admins ?? [] };
          },
          onRefused: (limit) => metrics.quotaRefusals.inc({ limit }),
        },
        // The runtime asks by scope only (/queue, /config): the channel is read back from it.
        defaultQueueMode: (scope) => {
          const cfg = config.config;
          const channelId = channelOfScope(scope);
          return resolveQueueMode(
            undefined,
            cfg.channels.find((c) => c.id === channelId),
            cfg.limits,
          );
        },
      });
    };
    ctx.provide('workspaces', { build, byName: new Map(), live } satisfies WorkspaceTable);
  },
});

/**
 * One agent's workspace as a component: it starts, stops and reloads as a unit. Turns already
 * running keep the workspace they started with; new turns find the new one. Plugin folders'
 * modes, tools, hooks and commands are applied to its runtime for as long as it runs.
 */
export function workspaceComponent(name: string, agent: AgentConfig): DaemonComponent {
  return defineComponent({
    name: `workspace:${name}`,
    inject: ['workspaces', 'mcp', 'extensions'],
    start: async (ctx) => {
      // The servers outlive this workspace: a rebuild keeps the unchanged ones running.
      await ctx.use('mcp').sync(name, agent.mcp);
      const table = ctx.use('workspaces');
      const ws = table.build(name, agent);
      ctx.effect(() => ws.dispose());
      ctx.effect(ctx.use('extensions').attach(ws.runtime, name));
      table.byName.set(name, ws);
      ctx.effect(() => {
        if (table.byName.get(name) === ws) table.byName.delete(name);
      });
    },
  });
}
