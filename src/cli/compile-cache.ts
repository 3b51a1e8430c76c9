import module from 'node:module';

/**
 * Node's on-disk compile cache (Node >= 22.1): code compiled once is reused by the next start.
 * Imported first by the CLI entry, so it covers what loads after it: the platform SDKs and
 * the AI SDK, which channeld imports lazily and which dominate start-up. The cache lives in
 * the OS temp dir (or NODE_COMPILE_CACHE); NODE_DISABLE_COMPILE_CACHE=1 turns it off.
 * Failing to enable it is never an error: start-up is only slower.
 */
try {
  module.enableCompileCache?.();
} catch {
  // A read-only temp dir, say: run without the cache.
}
