import type { AgentConfig, QueueMode } from '../config/schema.js';
import type { Conversations } from '../store/conversations.js';
import type { Runtime } from './runtime.js';

/** What /config reads (the workspace's BuiltinInfo has it). */
export interface ConfigCommandInfo {
  agentName: string;
  agent: () => AgentConfig;
  conversations: Conversations;
  defaultQueueMode: (scope: string) => QueueMode;
}

/** What a user may change with `/config KEY VALUE`: each goes through its own command, which checks it against what the operator allows. */
const settable: Record<string, { command: string; values: string }> = {
  queue: { command: 'queue', values: 'followup|interrupt|collect' },
  model: { command: 'model', values: 'one of /models' },
};

/** The endpoint's host only: a base_url may carry credentials (user:password@, a key in the query). */
function hostOf(url: string | undefined): string {
  if (!url) return 'none';
  try {
    return new URL(url).host;
  } catch {
    return 'unparsable';
  }
}

/**
 * `/config`: the conversation's effective settings (agent, model, modes, queue mode, limits),
 * never a secret: no key, no credentials in the endpoint, not the system prompt's text.
 * `/config queue interrupt` and `/config model NAME` change what a user may change, through
 * the same checks as `/queue` and `/model`.
 */
export function registerConfigCommand(runtime: Runtime, info: ConfigCommandInfo): void {
  runtime.commands.register({
    name: 'config',
    usage: '[queue|model VALUE]',
    help: "this conversation's settings; /config queue interrupt changes one",
    handler: async (ctx, args) => {
      const [key, ...rest] = args.trim().split(/\s+/);
      if (key) {
        const entry = settable[key.toLowerCase()];
        if (!entry)
          return `"${key}" is set by the operator. You can change: ${Object.entries(settable)
            .map(([k, s]) => `${k} (${s.values})`)
            .join(', ')}.`;
        const cmd = runtime.commands.find(entry.command, ctx.modes);
        if (!cmd) return `"${key}" cannot be changed here.`;
        return cmd.handler(ctx, rest.join(' '));
      }
      const a = info.agent();
      const prefs = info.conversations.get(info.agentName, ctx.scope);
      const lines = [
        `agent: ${info.agentName} (${a.provider}${a.provider === 'openai-compatible' ? ` at ${hostOf(a.base_url)}` : ''})`,
        `model: ${prefs.model ?? a.model ?? a.provider}${prefs.model ? ' (chosen here)' : ' (the default)'}`,
        `modes: ${[...ctx.modes].join(', ') || 'none'}`,
        `queue: ${prefs.queueMode ?? info.defaultQueueMode(ctx.scope)}${prefs.queueMode ? ' (chosen here)' : ' (the default)'}`,
        `limits: max_steps ${a.max_steps}, max_output_tokens ${a.max_output_tokens}, request_timeout_ms ${a.request_timeout_ms}, max_tool_result_chars ${a.max_tool_result_chars}, history_budget_chars ${a.history_budget_chars}`,
        `system prompt: ${a.system_prompt.length} characters${a.prompt_files.length ? ` plus ${a.prompt_files.length} file(s)` : ''}`,
      ];
      return `Settings for this conversation:\n${lines.join('\n')}\n\nChange: ${Object.entries(settable)
        .map(([k, s]) => `/config ${k} ${s.values}`)
        .join(', ')}.`;
    },
  });
}
