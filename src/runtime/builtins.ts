import type { AgentConfig, QueueMode } from '../config/schema.js';
import type { Conversations } from '../store/conversations.js';
import { whenSessionsWritable, type Sessions } from '../store/sessions.js';
import type { Runtime } from './runtime.js';
import { builtinModes } from './builtin-modes/index.js';
import { currentTimeTool } from './tool-registry.js';
import { registerConfigCommand } from './config-command.js';
import { registerToolsCommand } from './tools-command.js';

export interface BuiltinInfo {
  agentName: string;
  agent: () => AgentConfig;
  sessions: Sessions;
  conversations: Conversations;
  /** The queue mode in force for a scope when the conversation chose none. */
  defaultQueueMode: (scope: string) => QueueMode;
  /** Messages waiting behind this one in the scope. */
  queuedIn?: (scope: string) => number;
  /** Leave /status to the management actions' slash face. */
  statusFromActions?: boolean;
}

/** A conversation as its user sees it: /status, and the status action's slash face. */
export function conversationStatus(info: BuiltinInfo, scope: string, modes: ReadonlySet<string>): Record<string, string | number> {
  const a = info.agent();
  const prefs = info.conversations.get(info.agentName, scope);
  // Looked up, not created: asking stores no session. The slash face runs as a turn of `scope`,
  // so its state was read first (in cluster mode by the partition's owner, from PostgreSQL).
  const session = info.sessions.find(info.agentName, scope);
  return {
    Agent: `${info.agentName} (${a.provider})`,
    Model: prefs.model ?? a.model ?? a.provider,
    'Queue mode': prefs.queueMode ?? info.defaultQueueMode(scope),
    Session: session ? `${session.turns} turn(s) since ${new Date(session.createdAt).toISOString()}` : 'none stored yet',
    Modes: [...modes].join(', ') || 'none',
    'Waiting after this': info.queuedIn?.(scope) ?? 0,
  };
}

const queueModes: readonly QueueMode[] = ['followup', 'interrupt', 'collect'];

/** Building an Intl formatter costs more than a whole turn's other work: one per zone. */
const clocks = new Map<string, { format: Intl.DateTimeFormat; minute: number; text: string }>();
/** The local time in `timeZone` to the minute; formatted once a minute per zone, not once a turn. */
function localTime(timeZone: string, nowMs = Date.now()): string {
  const minute = Math.floor(nowMs / 60_000);
  let c = clocks.get(timeZone);
  if (!c) clocks.set(timeZone, (c = { format: new Intl.DateTimeFormat('en-GB', { dateStyle: 'full', timeStyle: 'short', timeZone }), minute: NaN, text: '' }));
  if (c.minute !== minute) Object.assign(c, { minute, text: c.format.format(new Date(nowMs)) });
  return c.text;
}

/** The models /model may choose: `models`, plus the default `model`. */
function allowedModels(a: AgentConfig): string[] {
  return [...new Set([...(a.model ? [a.model] : []), ...a.models])];
}

/** Registers the commands, tool, modes and prompt contributors every workspace has. */
export function registerBuiltins(runtime: Runtime, info: BuiltinInfo): void {
  const { agentName, conversations, sessions } = info;
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
    name: 'new',
    aliases: ['reset'],
    help: 'start a fresh session (the old one is kept)',
    handler: async (ctx) => {
      // The store may refuse the new session for now (another process's lock): wait, as a turn does.
      await whenSessionsWritable(sessions, ctx.signal, () => sessions.start(agentName, ctx.scope));
      return 'Started a new session.';
    },
  });
  if (!info.statusFromActions) {
    runtime.commands.register({
      name: 'status',
      help: 'this conversation: agent, model, queue mode, session length',
      handler: (ctx) =>
        Object.entries(conversationStatus(info, ctx.scope, ctx.modes))
          .map(([k, v]) => `${k}: ${v}`)
          .join('\n'),
    });
  }
  runtime.commands.register({
    name: 'models',
    help: 'list the models this conversation may use',
    handler: (ctx) => {
      const models = allowedModels(info.agent());
      if (!models.length) return `This agent (${info.agent().provider}) has no models to choose from.`;
      const current = conversations.get(agentName, ctx.scope).model ?? info.agent().model;
      return `Models:\n${models.map((m) => `${m === current ? '• ' : '  '}${m}`).join('\n')}`;
    },
  });
  runtime.commands.register({
    name: 'model',
    usage: 'NAME',
    help: 'use another model in this conversation',
    handler: (ctx, args) => {
      const models = allowedModels(info.agent());
      if (!args)
        return `Current model: ${conversations.get(agentName, ctx.scope).model ?? info.agent().model ?? info.agent().provider}. Choose with /model NAME from: ${models.join(', ') || 'none'}.`;
      if (!models.includes(args)) return `"${args}" is not allowed here. Choose one of: ${models.join(', ') || 'none'}.`;
      conversations.update(agentName, ctx.scope, { model: args });
      return `Model set to ${args}.`;
    },
  });
  runtime.commands.register({
    name: 'queue',
    usage: 'followup|interrupt|collect',
    help: 'what a message does while an answer is running',
    handler: (ctx, args) => {
      const mode = args.toLowerCase() as QueueMode;
      const current = `Queue mode is ${conversations.get(agentName, ctx.scope).queueMode ?? info.defaultQueueMode(ctx.scope)}`;
      if (!args) return `${current}. Choose one of: ${queueModes.join(', ')}.`;
      if (!queueModes.includes(mode))
        return `"${args}" is not a queue mode; the valid values are ${queueModes.join(', ')} (followup: after the running answer, in order; interrupt: stop it and answer the newest; collect: merge into one next turn). ${current}.`;
      conversations.update(agentName, ctx.scope, { queueMode: mode });
      return `Queue mode set to ${mode}.`;
    },
  });
  registerConfigCommand(runtime, info);
  registerToolsCommand(runtime, info.agent);
  runtime.commands.register({
    name: 'mode',
    usage: 'NAME',
    help: 'switch a mode on or off in this conversation',
    handler: (ctx, args) => {
      const names = runtime.modes.list().map((m) => m.name);
      if (!args || !runtime.modes.has(args))
        return names.length
          ? `Modes: ${names.map((n) => `${n} (${ctx.modes.has(n) ? 'on' : 'off'})`).join(', ')}. Switch with /mode NAME.`
          : 'This agent has no modes.';
      const on = !ctx.modes.has(args);
      const modes = { ...conversations.get(agentName, ctx.scope).modes, [args]: on };
      conversations.update(agentName, ctx.scope, { modes });
      return `Mode ${args} is ${on ? 'on' : 'off'}.`;
    },
  });
  runtime.tools.register(currentTimeTool);
  for (const mode of builtinModes) runtime.modes.register(mode);
  runtime.prompt.register({ name: 'system_prompt', priority: 0, contribute: () => info.agent().system_prompt });
  runtime.prompt.register({
    name: 'conversation_context',
    priority: 50,
    contribute: (ctx) => {
      const a = info.agent();
      const now = localTime(a.time_zone);
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
