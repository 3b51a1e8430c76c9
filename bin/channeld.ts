#!/usr/bin/env node
// First: the compile cache must be on before the rest is compiled. Static imports are all
// compiled before any of them runs, so the CLI is loaded with import() once the cache is on:
// otherwise channeld's own modules (everything src/cli/main.ts imports) never use the cache.
import '../src/cli/compile-cache.js';

const [{ builtinKinds }, { runCli }] = await Promise.all([import('../channels/registry.js'), import('../src/cli/main.js')]);

/** The `channeld` executable: the CLI with the channel kinds channeld ships. */
await runCli(process.argv.slice(2), builtinKinds);
