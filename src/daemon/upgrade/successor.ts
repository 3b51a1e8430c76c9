import { CodedError, errorMessage } from '../../contracts/errors.js';
import { MAX_BUSY_PARTS, parseToNew, type ToNew, type ToOld } from './protocol.js';

/** Set by the old process in the environment of the new one it starts. */
export const SUCCESSOR_ENV = 'CHANNELD_UPGRADE_FROM';

/** A start that failed in the new process of an upgrade: the old one reports why (at most 1 s). */
export function reportFailureToOld(err: unknown): Promise<void> {
  if (!process.send || !process.connected) return Promise.resolve();
  const reason = err instanceof CodedError ? `${err.code}: ${err.message}` : errorMessage(err);
  return new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, 1000);
    process.send!({ t: 'failed', reason } satisfies ToOld, undefined, {}, () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** The IPC channel to the old process as a Successor uses it: the process's own, or a test's. */
export interface SuccessorPort {
  send(m: ToOld): void;
  onMessage(listener: (m: unknown) => void): void;
  onDisconnect(listener: () => void): void;
  disconnect(): void;
}

/**
 * The new process's end of an upgrade: it asks the old one for each listener before
 * starting its own, says when it is ready, and learns which conversations' turns still run
 * there. Everything it waits for also ends when the old process goes away (the channel
 * closes), so a crashed predecessor never holds this one up; after `abort` (the upgrade
 * failed, the old process serves on and stops this one) nothing is taken over.
 */
export class Successor {
  readonly #send: (m: ToOld) => void;
  readonly #disconnect: () => void;
  readonly #taken = new Map<string, (state: unknown) => void>();
  readonly #restore = new Map<string, (state: unknown) => void>();
  #frozen: (busy: string[]) => void = () => {};
  #done: () => void = () => {};
  /** The old process took no message and starts no turn any more; these scopes' turns still run there. */
  readonly frozen: Promise<string[]>;
  /** The old process's turns ended (or it went away). */
  readonly done: Promise<void>;
  #gone = false;
  /** The old process failed the upgrade (`abort`): it serves on, this process is stopped. */
  #aborted = false;
  /** The `busy` parts received so far: a long list comes ahead of its `frozen`. */
  readonly #busyParts: string[][] = [];

  private constructor(port: SuccessorPort) {
    this.#send = (m) => port.send(m);
    this.#disconnect = () => port.disconnect();
    this.frozen = new Promise((resolve) => (this.#frozen = resolve));
    this.done = new Promise((resolve) => (this.#done = resolve));
  }

  /** This process's link to the old one, when it was started by an upgrade (the IPC channel is there). */
  static fromProcess(env: NodeJS.ProcessEnv = process.env): Successor | undefined {
    if (!env[SUCCESSOR_ENV] || !process.send || !process.channel) return undefined;
    delete env[SUCCESSOR_ENV];
    return Successor.attach({
      send: (m) => {
        if (process.connected) process.send!(m, undefined, {}, () => {});
      },
      onMessage: (listener) => void process.on('message', listener),
      onDisconnect: (listener) => void process.once('disconnect', listener),
      disconnect: () => {
        if (process.connected) process.disconnect();
      },
    });
  }

  /** A link over `port` (fromProcess passes this process's IPC channel). */
  static attach(port: SuccessorPort): Successor {
    const s = new Successor(port);
    port.onMessage((m) => s.#receive(parseToNew(m)));
    port.onDisconnect(() => s.#goneAway());
    return s;
  }

  #receive(m: ToNew | undefined): void {
    if (!m) return;
    if (m.t === 'taken') {
      this.#taken.get(m.channel)?.(m.state);
      this.#taken.delete(m.channel);
    } else if (m.t === 'restore') this.#restore.get(m.channel)?.(m.state);
    // Past the bound a part is not kept: the count in `frozen` then does not match (#freeze).
    else if (m.t === 'busy') {
      if (this.#busyParts.length < MAX_BUSY_PARTS) this.#busyParts.push(m.scopes);
    } else if (m.t === 'frozen') this.#freeze(m);
    else if (m.t === 'abort') this.#aborted = true;
    else this.#done();
  }

  /**
   * The old process froze. A part missing (one the parser dropped) would leave conversations
   * whose turns still run there unheld, to be answered twice: then nothing is taken from
   * `frozen`, and this process waits until the old one has gone (as for a `frozen` dropped).
   */
  #freeze(m: { busy: string[] } | { parts: number }): void {
    const parts = this.#busyParts.splice(0);
    if ('busy' in m) this.#frozen(m.busy);
    else if (parts.length === m.parts) this.#frozen(parts.flat());
  }

  #goneAway(): void {
    this.#gone = true;
    for (const resolve of this.#taken.values()) resolve(undefined);
    this.#taken.clear();
    // After `abort` the old process is alive and serving, and this one is about to be
    // stopped: taking over (its turns, its run files) would answer what it answers.
    if (this.#aborted) return;
    this.#frozen([]);
    this.#done();
  }

  /** The old process failed the upgrade (`abort`): it serves on and stops this process. */
  get aborted(): boolean {
    return this.#aborted;
  }

  /** Asks the old process to stop `channel`'s listener; resolves with what it handed over. */
  take(channel: string): Promise<unknown> {
    if (this.#gone) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      this.#taken.set(channel, resolve);
      this.#send({ t: 'take', channel });
    });
  }

  /** What to do with the state the old process sends for `channel`, a listener both ran, as it stops its own. */
  onRestore(channel: string, restore: (state: unknown) => void): void {
    this.#restore.set(channel, restore);
  }

  ready(): void {
    this.#send({ t: 'ready' });
  }

  /** After the hand-over: the channel is not needed any more and must not keep this process alive. */
  close(): void {
    this.#disconnect();
  }
}
