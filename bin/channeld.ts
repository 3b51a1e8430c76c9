#!/usr/bin/env node
// First: the compile cache must be on before the lazily loaded SDKs are compiled.
import '../src/cli/compile-cache.js';
import { builtinKinds } from '../channels/registry.js';
import { runCli } from '../src/cli/main.js';

/** The `channeld` executable: the CLI with the channel kinds channeld ships. */
await runCli(process.argv.slice(2), builtinKinds);
