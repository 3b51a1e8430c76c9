/**
 * The public API of a plugin folder, published as the package subpath `channeld/plugin`
 * (package.json `exports`): a folder anywhere on disk with its own package.json depending on
 * channeld imports everything it needs from here, including the zod the daemon itself uses,
 * so a tool's `input` schema is built with the daemon's zod and needs no zod of its own.
 */
export { z } from 'zod';
export type * from './commands.js';
export type * from './hooks.js';
export type * from './message.js';
export type * from './modes.js';
export { definePluginFolder, type PluginDefinition } from './plugin-folder.js';
export type * from './tools.js';
export type * from './turn.js';
