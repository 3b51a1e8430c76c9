import { CodedError } from '../contracts/errors.js';
import { MESSAGE_HOOK_TIMEOUT_MS, type MessageHook, type MessageHookEvent } from '../contracts/message-hooks.js';
import { settleWithin } from '../util/abortable.js';
import type { PluginFailure } from './plugin-failure.js';

/** Runs of one hook still going; past this a message skips the hook (a hook that never ends cannot pile up work). */
export const MESSAGE_HOOK_MAX_IN_FLIGHT = 64;

interface Entry {
  plugin: string;
  source: string;
  hook: MessageHook;
  inFlight: number;
}

/**
 * The plugin folders' message hooks. `emit` starts every hook of the event's phase and
 * returns at once: delivery never waits for a hook. Each run is bounded by the hook's
 * `timeout_ms` (its signal aborts then); a throw, a timeout and a skipped run are reported
 * with the plugin's name through `onError` (the daemon logs and counts them).
 */
export class MessageHooks {
  readonly #entries = new Set<Entry>();
  readonly #running = new Set<Promise<void>>();
  readonly #onError: (f: PluginFailure) => void;

  constructor(onError: (f: PluginFailure) => void) {
    this.#onError = onError;
  }

  /** Adds a plugin's message hooks until the returned disposer runs. */
  add(plugin: string, source: string, hooks: readonly MessageHook[]): () => void {
    const added = hooks.map((hook) => ({ plugin, source, hook, inFlight: 0 }));
    for (const e of added) this.#entries.add(e);
    return () => {
      for (const e of added) this.#entries.delete(e);
    };
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Starts every hook of `event.phase`; never throws, never waits. */
  emit(event: MessageHookEvent): void {
    for (const e of this.#entries) if (e.hook.phase === event.phase) this.#start(e, event);
  }

  /** Resolves once every run started so far has ended or timed out. */
  async idle(): Promise<void> {
    while (this.#running.size) await Promise.all(this.#running);
  }

  #start(e: Entry, event: MessageHookEvent): void {
    const report = (err: unknown) => this.#onError({ plugin: e.plugin, source: e.source, kind: 'hook', name: e.hook.name, phase: event.phase, err });
    if (e.inFlight >= MESSAGE_HOOK_MAX_IN_FLIGHT) {
      report(new CodedError('MESSAGE_HOOK_BUSY', `${MESSAGE_HOOK_MAX_IN_FLIGHT} runs are still going; this message skipped the hook`));
      return;
    }
    const timeoutMs = e.hook.timeout_ms ?? MESSAGE_HOOK_TIMEOUT_MS;
    const controller = new AbortController();
    e.inFlight++;
    // Started in a microtask, so even a hook that blocks synchronously runs after delivery goes on.
    const work = Promise.resolve().then(() => e.hook.run(event, controller.signal));
    work.then(
      () => e.inFlight--,
      (err: unknown) => {
        e.inFlight--;
        // A hook that gave up on its abort is the timeout already reported.
        if (!controller.signal.aborted) report(err);
      },
    );
    const run = settleWithin(work, timeoutMs).then((settled) => {
      if (settled) return;
      const err = new CodedError('MESSAGE_HOOK_TIMEOUT', `did not finish within ${timeoutMs} ms`);
      controller.abort(err);
      report(err);
    });
    this.#running.add(run);
    void run.finally(() => this.#running.delete(run));
  }
}
