import type { AgentConfig } from '../config/schema.js';
import type { Tool, ToolSelection } from '../contracts/tools.js';

/**
 * Why a tool is not offered in a conversation, in the words `/tools` shows; empty when it
 * is offered. The order is the order a reader fixes them in: the operator's list first.
 */
export function notOfferedBecause(t: Tool, sel: ToolSelection): string[] {
  const why: string[] = [];
  const listed = sel.allow?.includes(t.name);
  if (sel.allow !== undefined && !listed) why.push('not in the [agent] tools allowlist');
  // A tool off by default is turned on only by naming it in the allowlist.
  if (t.enabled_by_default === false && !listed) why.push('disabled by default (name it in [agent] tools)');
  // Any one of the listed modes offers the tool (a tool shared by several modes).
  if (t.requires_modes?.length && !t.requires_modes.some((m) => sel.modes.has(m))) why.push(`mode not active (${t.requires_modes.join(' or ')})`);
  const missing = (t.requires_features ?? []).filter((f) => !sel.features.has(f));
  if (missing.length) why.push(`feature missing (${missing.join(', ')})`);
  if (t.requires_sandbox && !sel.sandbox) why.push('needs a sandbox ([agent] sandbox = true)');
  // Without a skill set (no skills_dir), a tool that needs skills is never offered.
  const unloaded = (t.requires_skills ?? []).filter((k) => sel.skills?.has(k) !== true);
  if (unloaded.length) why.push(`needs the skill${unloaded.length > 1 ? 's' : ''} ${unloaded.join(', ')} ([agent] skills_dir)`);
  return why;
}

/** Whether a call of `t` asks in the chat first: the agent's `tool_approval` wins over the tool's own `approval`. */
export function needsApproval(agent: Pick<AgentConfig, 'tool_approval'>, t: Pick<Tool, 'name' | 'approval'>): boolean {
  const a = agent.tool_approval;
  if (Array.isArray(a)) {
    if (a.includes(t.name)) return true;
  } else if (a && Object.hasOwn(a, t.name)) return a[t.name] === 'always';
  return t.approval === 'always';
}
