import { spawn, type ChildProcess } from 'node:child_process';
import { CodedError, errorMessage } from '../../contracts/errors.js';
import { HTTP_DRAIN_MS } from '../../observe/http-server.js';
import type { Logger } from '../../observe/logger.js';
import { LISTEN_FD_ENV } from '../../util/listen-fd.js';
import { successorCommand } from './command.js';
import type { ListenerGate } from './listeners.js';
import { frozenMessages, parseToOld, type ToNew } from './protocol.js';
import { SUCCESSOR_ENV } from './successor.js';
import { notifySystemd } from './systemd.js';

export interface UpgradeOutcome {
  ok: boolean;
  /** The new process (also when it failed and was stopped). */
  pid?: number;
  /** Why it failed: the new process's own reason where it gave one. */
  error?: string;
  /** The error code when it failed or was refused (UPGRADE_FAILED, UPGRADE_IN_PROGRESS, DAEMON_SHUTTING_DOWN). */
  code?: string;
  took_ms: number;
}

/** The HTTP server as an upgrade sees it (src/observe/http-server.ts). */
export interface UpgradeHttp {
  listeningFd(): number | undefined;
  stopAccepting(): void;
  drained(signal: AbortSignal): Promise<void>;
}

export interface PredecessorOptions {
  log: Logger;
  timeoutMs: () => number;
  http: UpgradeHttp;
  /** Stops taking messages and starting turns; the scopes whose turns still run. */
  freeze(): string[];
  /**
   * Called as an upgrade starts; what it returns is called if the upgrade fails, once the new
   * process has exited: it queues here what that process stored (and acknowledged) meanwhile,
   * which only a restart would read otherwise, and returns how many.
   */
  watchStored(): () => number;
  /**
   * Why no upgrade may start in this process now, or undefined: it was itself started by an
   * upgrade whose hand-over has not finished (it still holds back the old process's
   * conversations, which a third process would not know of and would run again).
   */
  refusal?(): string | undefined;
  /** Tells systemd (notifySystemd, the default); a test passes its own. */
  notify?(fields: string[]): Promise<unknown>;
  /** A failed upgrade's new process is gone and this process serves on (its listeners run here again). */
  onRecovered?(): void;
}

/** How long a new process that failed gets to exit after SIGTERM before SIGKILL. */
const KILL_AFTER_MS = 5000;

/**
 * The old process's end of an upgrade: starts the new build with the HTTP listening socket
 * (so the port never closes) and an IPC channel, stops each listener when the new process
 * asks for it (handing over its session), and once the new one is ready stops accepting,
 * freezes the dispatcher and tells it which conversations' turns still run here. If the new
 * one fails or is not ready within `upgrade_timeout_ms`, it is stopped and every listener
 * handed over runs here again.
 */
export class Predecessor {
  readonly gates = new Map<string, ListenerGate>();
  readonly #o: PredecessorOptions;
  #current: Promise<UpgradeOutcome> | undefined;
  #child: ChildProcess | undefined;
  /** The daemon is stopping (stop()): no upgrade starts any more. */
  #stopping = false;
  /** Fails the upgrade under way (until its new process is ready). */
  #abort: ((why: string) => void) | undefined;
  /** The new process took over: this one only finishes its turns and stops. */
  #over = false;
  /** Listeners that ran in both processes until the hand-over: their late state goes over as they are dropped. */
  readonly #overlapped = new Map<string, ListenerGate>();
  #handedOver: () => void = () => {};
  /** Resolves once a failed upgrade's new process has exited and its listeners run here again. */
  #recovered: Promise<void> = Promise.resolve();
  /** After the hand-over: this process's HTTP connections ended (each moved to the new process), or HTTP_DRAIN_MS passed. */
  #drained: Promise<void> | undefined;
  /** Resolves once the new process took over: the caller stops this daemon (its stop waits for drained()), then calls finish(). */
  readonly handedOver: Promise<void>;

  constructor(options: PredecessorOptions) {
    this.#o = options;
    this.handedOver = new Promise((resolve) => (this.#handedOver = resolve));
  }

  /** Starts the new build and hands over; one at a time, and none after one succeeded. */
  upgrade(options: { exec?: string } = {}): Promise<UpgradeOutcome> {
    const refused = this.#refusal();
    if (refused) {
      this.#o.log.warn({ code: refused.code, reason: refused.message }, 'upgrade refused');
      return Promise.resolve({ ok: false, code: refused.code, error: refused.message, took_ms: 0 });
    }
    const run = this.#run(options.exec);
    this.#current = run;
    // A failed one is over once its process has exited and what it took runs here again: an
    // upgrade begun before would have its listeners resumed here under it.
    void run.then((r) => {
      if (!r.ok) void this.#recovered.then(() => (this.#current = undefined));
    });
    return run;
  }

  /**
   * `upgrading` from the start of an upgrade until it took over or, failed, its new process
   * exited and the listeners it had run here again; `handedOver` after a successful one.
   */
  get phase(): 'idle' | 'upgrading' | 'handedOver' {
    if (this.#over) return 'handedOver';
    return this.#current ? 'upgrading' : 'idle';
  }

  #refusal(): CodedError | undefined {
    if (this.#stopping) return new CodedError('DAEMON_SHUTTING_DOWN', 'this daemon is stopping, so no upgrade starts in it');
    if (this.#current) return new CodedError('UPGRADE_IN_PROGRESS');
    const why = this.#o.refusal?.();
    return why === undefined ? undefined : new CodedError('UPGRADE_IN_PROGRESS', why);
  }

  /**
   * The daemon is stopping (SIGTERM): no upgrade starts from now on, and one whose new
   * process is not ready yet fails, that process stopped as on any failed upgrade. Otherwise
   * it would take over once this one exited, outside the service manager's watch.
   */
  stop(): void {
    this.#stopping = true;
    this.#abort?.('this daemon is stopping (SIGTERM) before the new process was ready');
  }

  /**
   * A channel's gate is dropped (its plugin unloads). After the hand-over that is this daemon
   * stopping, past the end of its turns and before the adapter is closed: what those turns
   * added to a listener both processes ran (web chat's late answers) goes to the new process
   * now, ahead of `done` on the same channel, so it has them before it runs those
   * conversations' next messages.
   */
  release(channel: string, gate: ListenerGate): void {
    if (this.gates.get(channel) === gate) this.gates.delete(channel);
    if (this.#overlapped.get(channel) !== gate) return;
    this.#overlapped.delete(channel);
    const state = gate.lateState();
    const child = this.#child;
    if (state !== undefined && child?.connected) child.send({ t: 'restore', channel, state } satisfies ToNew, undefined, {}, () => {});
  }

  /**
   * Resolves once the HTTP connections this process still had at the hand-over ended, at
   * most HTTP_DRAIN_MS after it (at once without a hand-over). Its routes answer until
   * then: a stop waits for this before it unloads them.
   */
  drained(): Promise<void> {
    return this.#drained ?? Promise.resolve();
  }

  /**
   * This daemon stopped (its turns ended, what they wrote is stored, its connections
   * drained): the new process may run their conversations now. Resolves once told (at most
   * 1 s, after systemd-notify's own at most 5 s).
   */
  async finish(): Promise<void> {
    const child = this.#child;
    if (!this.#over || !child) return;
    // This process is still the unit's main one: exiting before the new process's own
    // MAINPID= arrived (it sends it after `frozen`, and systemd-notify may be slow) would
    // have systemd count the unit stopped and stop the new process with it.
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      const fields = [`MAINPID=${child.pid}`];
      await (this.#o.notify ? this.#o.notify(fields) : notifySystemd(fields, this.#o.log));
    }
    if (!child.connected) return;
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 1000);
      child.send({ t: 'done' } satisfies ToNew, undefined, {}, () => {
        clearTimeout(timer);
        if (child.connected) child.disconnect();
        resolve();
      });
    });
  }

  #run(exec: string | undefined): Promise<UpgradeOutcome> {
    const started = Date.now();
    const log = this.#o.log;
    const failed = (error: string, childPid?: number): UpgradeOutcome => {
      // `pid` names the process that logs: the new one is `childPid`.
      log.error({ childPid, reason: error }, 'upgrade failed: the new process was stopped, this one carries on');
      return {
        ok: false,
        code: 'UPGRADE_FAILED',
        error: new CodedError('UPGRADE_FAILED', error).message,
        took_ms: Date.now() - started,
        ...(childPid ? { pid: childPid } : {}),
      };
    };
    const fd = this.#o.http.listeningFd();
    if (fd === undefined) return Promise.resolve(failed('the HTTP listening socket cannot be handed over'));
    let cmd: { file: string; args: string[] };
    try {
      cmd = successorCommand(exec);
    } catch (err) {
      return Promise.resolve(failed(errorMessage(err)));
    }
    log.info({ file: cmd.file, args: cmd.args }, 'upgrade: starting the new build');
    let child: ChildProcess;
    try {
      child = spawn(cmd.file, cmd.args, {
        // fd 3 in the new process is this listening socket; the IPC channel comes after it.
        stdio: ['ignore', 'inherit', 'inherit', fd, 'ipc'],
        env: { ...process.env, [LISTEN_FD_ENV]: '3', [SUCCESSOR_ENV]: String(process.pid) },
      });
    } catch (err) {
      // Thrown at once (a bad argument, EBADF): nothing started, nothing to undo.
      return Promise.resolve(failed(`cannot start ${cmd.file}: ${errorMessage(err)}`));
    }
    // Tracked from the same tick as the spawn: the new process stores nothing before it.
    const recoverStored = this.#o.watchStored();
    this.#child = child;
    const paused: ListenerGate[] = [];
    return new Promise<UpgradeOutcome>((resolve) => {
      let settled = false;
      let reason: string | undefined;
      const timeoutMs = this.#o.timeoutMs();
      const timer = setTimeout(() => fail(`the new process was not ready within upgrade_timeout_ms = ${timeoutMs}`), timeoutMs);
      const send = (m: ToNew) => {
        if (child.connected) child.send(m, undefined, {}, () => {});
      };
      const fail = (why: string) => {
        if (settled) return;
        settled = true;
        this.#abort = undefined;
        clearTimeout(timer);
        child.off('message', onMessage);
        // Its channel's close must not read as this process gone (it would take over):
        // `abort` goes first, the close once it is written.
        if (child.connected)
          child.send({ t: 'abort' } satisfies ToNew, undefined, {}, () => {
            if (child.connected) child.disconnect();
          });
        if (child.exitCode === null && child.signalCode === null) {
          child.kill('SIGTERM');
          const kill = setTimeout(() => child.kill('SIGKILL'), KILL_AFTER_MS);
          kill.unref();
          // This daemon exiting first must not leave it behind holding the port and a listener.
          const killOnExit = () => child.kill('SIGKILL');
          process.once('exit', killOnExit);
          child.once('exit', () => {
            clearTimeout(kill);
            process.off('exit', killOnExit);
          });
        }
        // Once the new process is gone (a SIGKILL ends it within KILL_AFTER_MS): what it stored
        // is queued first, then the listeners it took run here again. Resumed before, they
        // answered a message sent meanwhile ahead of an earlier one it stored in the same
        // conversation, and could poll beside it while it still held their connection.
        let recovered!: () => void;
        this.#recovered = new Promise((resolve) => (recovered = resolve));
        const recover = () => {
          try {
            const count = recoverStored();
            if (count) log.info({ count }, 'upgrade failed: the messages the new process stored are answered here');
          } catch (err) {
            // The daemon stopping meanwhile (its database closed): the next start reads them.
            log.warn({ err }, 'upgrade failed: what the new process stored is left for the next start');
          }
          for (const gate of paused) gate.resume();
          recovered();
          this.#o.onRecovered?.();
        };
        // No pid: it never started, and node may never tell its exit.
        if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) recover();
        else child.once('exit', recover);
        resolve(failed(reason ?? why, child.pid));
      };
      const ready = () => {
        if (settled) return;
        settled = true;
        this.#abort = undefined;
        clearTimeout(timer);
        // From here the new process accepts every connection; the ones this process has are
        // answered here, each answer closing its connection, until they are gone (drained()).
        this.#o.http.stopAccepting();
        this.#drained = this.#o.http.drained(AbortSignal.timeout(HTTP_DRAIN_MS));
        const busy = this.#o.freeze();
        // Listeners that may overlap (socket mode, web chat) were left running until
        // now: the new process has its own open, so this one's close loses nothing. What
        // they hold (web chat's tabs) goes over first, so a tab that reconnects on the close
        // finds its conversation in the new process. A leased one (cluster mode) stops here
        // too, and its lease is free for whichever instance takes it next.
        for (const [channel, gate] of this.gates) {
          if (paused.includes(gate)) continue;
          if (gate.move === 'overlap') this.#overlapped.set(channel, gate);
          // An adapter's handoverState that throws costs its state, not the hand-over.
          const lost = (err: unknown) => log.warn({ err, channel }, 'upgrade: a listener could not hand its state over');
          try {
            const state = gate.overlapState();
            if (state !== undefined) send({ t: 'restore', channel, state });
          } catch (err) {
            lost(err);
          }
          gate.pause().catch(lost);
        }
        // In parts when the list is longer than one message may carry: one over the bound
        // would be dropped whole, and the new process would start no turn until this one exited.
        const frozen = frozenMessages(busy);
        if (frozen) for (const m of frozen) send(m);
        else
          log.warn(
            { childPid: child.pid, busy: busy.length },
            'upgrade: the list of conversations still busy here is past what the new process takes; it starts no turn until this process has exited',
          );
        log.info({ childPid: child.pid, busy: busy.length, took_ms: Date.now() - started }, 'upgrade: handed over to the new process');
        this.#over = true;
        this.#handedOver();
        resolve({ ok: true, pid: child.pid, took_ms: Date.now() - started });
      };
      const onMessage = (raw: unknown) => {
        const m = parseToOld(raw);
        if (!m) return;
        if (m.t === 'failed') reason = m.reason;
        else if (m.t === 'ready') ready();
        else {
          const gate = this.gates.get(m.channel);
          if (gate?.move !== 'handOver' || settled) return send({ t: 'taken', channel: m.channel });
          paused.push(gate);
          log.info({ channel: m.channel }, 'upgrade: listener stopped for the new process');
          gate.pause().then(
            (state) => send({ t: 'taken', channel: m.channel, state }),
            () => send({ t: 'taken', channel: m.channel }),
          );
        }
      };
      this.#abort = fail;
      child.on('message', onMessage);
      child.once('error', (err) => fail(`cannot start ${cmd.file}: ${errorMessage(err)}`));
      child.once('exit', (code, signal) => fail(`the new process exited (${signal ?? `status ${code}`}) before it was ready`));
    });
  }
}
