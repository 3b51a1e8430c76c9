import type { AgentConfig } from '../config/schema.js';
import type { Runtime } from './runtime.js';

export interface BuiltinInfo {
  agentName: string;
  agent: () => AgentConfig;
  /** Whether a turn is running in a scope, for /status. */
  isRunning?: (scope: string) => boolean;
}

/** Registers the commands and prompt contributors every workspace has. */
export function registerBuiltins(runtime: Runtime, info: BuiltinInfo): void {
  runtime.commands.register({
    name: 'help',
    aliases: ['start'],
    help: 'list the commands',
    handler: (ctx) => `Commands:\n\n${runtime.commands.help(ctx.modes)}`,
  });
  runtime.commands.register({
    name: 'stop',
    help: 'stop the running answer and drop the queued ones in this conversation',
    // Dispatch handles /stop on its fast path before a turn exists; this entry is for /help.
    handler: () => 'Nothing to stop.',
  });
  runtime.commands.register({
    name: 'status',
    help: 'this conversation: agent, model, whether a turn is running',
    handler: (ctx) => {
      const a = info.agent();
      return [
        `Agent: ${info.agentName} (${a.provider}${a.model ? `, ${a.model}` : ''})`,
        `Conversation: ${ctx.scope}`,
        `Running: ${info.isRunning?.(ctx.scope) ? 'yes' : 'no'}`,
      ].join('\n');
    },
  });
  runtime.prompt.register({ name: 'system_prompt', priority: 0, contribute: () => info.agent().system_prompt });
  runtime.prompt.register({
    name: 'conversation_context',
    priority: 50,
    contribute: (ctx) => {
      const a = info.agent();
      const now = new Intl.DateTimeFormat('en-GB', { dateStyle: 'full', timeStyle: 'short', timeZone: a.time_zone }).format(new Date());
      return `You are chatting on ${ctx.message.kind} in a ${ctx.message.chat.type === 'dm' ? 'direct message' : 'group chat'} with ${ctx.message.sender.name}. Local time: ${now} (${a.time_zone}).`;
    },
  });
  runtime.prompt.register({
    name: 'passive_context',
    priority: 60,
    contribute: (ctx) => {
      const passive = ctx.request.passive ?? [];
      if (!passive.length) return undefined;
      return `Recent messages in this chat that were not addressed to you:\n${passive.map((m) => `${m.sender.name}: ${m.text}`).join('\n')}`;
    },
  });
}
