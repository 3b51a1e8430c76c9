import type { AgentConfig } from '../config/schema.js';
import type { Runtime } from './runtime.js';
import { needsApproval, notOfferedBecause } from './tool-policy.js';

/** Lines per part of the listing: an agent with several MCP servers may have hundreds of tools. */
const MAX_LINES = 40;

const capped = (lines: string[]): string[] => (lines.length > MAX_LINES ? [...lines.slice(0, MAX_LINES), `  … and ${lines.length - MAX_LINES} more`] : lines);

/**
 * `/tools`: what this conversation's turns are offered now (its modes, the agent's
 * allowlist, features and sandbox), which of those ask first, and for each tool that is
 * not offered, why.
 */
export function registerToolsCommand(runtime: Runtime, agent: () => AgentConfig): void {
  runtime.commands.register({
    name: 'tools',
    help: 'the tools offered here, and why the others are not',
    handler: (ctx) => {
      const sel = runtime.toolSelection(ctx.modes);
      const offered: string[] = [];
      const not: string[] = [];
      for (const t of runtime.tools.all().sort((a, b) => a.name.localeCompare(b.name))) {
        const why = notOfferedBecause(t, sel);
        if (why.length) not.push(`• ${t.name}: ${why.join('; ')}`);
        else offered.push(`• ${t.name}${needsApproval(agent(), t) ? ' (needs approval)' : ''}`);
      }
      const parts = [offered.length ? `Tools offered here:\n${capped(offered).join('\n')}` : 'No tools are offered here.'];
      if (not.length) parts.push(`Not offered:\n${capped(not).join('\n')}`);
      return parts.join('\n\n');
    },
  });
}
