import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import { FakeLlm } from '../fakes/llm/server.js';
import { startDaemon, type TestDaemon } from './daemon.js';
import { ChatClient } from './webchat-client.js';

/**
 * Per-test fixtures: each starts one resource and registers its release with vitest's
 * `onTestFinished`, so a test (or its `beforeEach`) acquires what it needs in one line and
 * nothing leaks when an assertion fails half way. Finished hooks run in reverse order of
 * registration, after `afterEach`: what was started last (a chat tab, then the daemon) is
 * released first, and a platform fake outlives the daemon that talks to it.
 */

/** `startDaemon(body, env, daemonExtra, httpExtra)`, stopped when the test finishes. */
export async function withDaemon(body: string, env: NodeJS.ProcessEnv = {}, daemonExtra = '', httpExtra = ''): Promise<TestDaemon> {
  const d = await startDaemon(body, env, daemonExtra, httpExtra);
  onTestFinished(() => d.stop());
  return d;
}

/**
 * `withDaemon`, returned once every channel has made its first connection attempt: a
 * platform fake has been asked who the bot is (and a refused token has parked its channel).
 */
export async function withChannelDaemon(body: string, env: NodeJS.ProcessEnv = {}): Promise<TestDaemon> {
  const d = await withDaemon(body, env);
  await d.daemon.supervisor.firstAttempts();
  return d;
}

/** A web chat tab on `d` (channel path `path`), open, closed when the test finishes. */
export async function withChat(d: Pick<TestDaemon, 'url'>, tab: string, options: { token?: string; path?: string } = {}): Promise<ChatClient> {
  const c = new ChatClient(d.url, tab, options.token, options.path);
  onTestFinished(() => c.close());
  await c.opened;
  return c;
}

/** Starts a fake server and closes it when the test finishes. */
export async function withStarted<F extends { start(): Promise<unknown>; close(): Promise<void> }>(fake: F): Promise<F> {
  await fake.start();
  onTestFinished(() => fake.close());
  return fake;
}

/** The fake OpenAI-compatible server, listening, closed when the test finishes. */
export const withLlm = (): Promise<FakeLlm> => withStarted(new FakeLlm());

/** A fresh temp directory named `channeld-<prefix>-…`, removed when the test finishes. */
export function withTempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), `channeld-${prefix}-`));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
