/**
 * The contracts every stage and every extension shares, and nothing else: the message a
 * channel delivers, the adapter a channel implements, the events a model runner yields,
 * the turn context hooks/commands/prompt contributors receive, the shapes of hooks,
 * commands, tools and modes, and the coded error catalogue. Nothing here imports a stage;
 * stages import this folder and the stages below them (docs/ARCHITECTURE.md).
 */
export * from './agent-events.js';
export * from './agent-runner.js';
export * from './channel.js';
export * from './commands.js';
export * from './errors.js';
export * from './hooks.js';
export * from './http.js';
export * from './message.js';
export * from './secret-ref.js';
export * from './modes.js';
export * from './plugin-folder.js';
export * from './tools.js';
export * from './topology.js';
export * from './turn.js';
