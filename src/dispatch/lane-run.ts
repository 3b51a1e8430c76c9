import { CodedError } from '../contracts/errors.js';

/** The executor's promise; one that throws before its first await gives a rejection like any other. */
export function startTurn<J, E>(execute: (job: J, signal: AbortSignal) => Promise<E>, job: J, signal: AbortSignal): Promise<E> {
  try {
    return execute(job, signal);
  } catch (err) {
    return Promise.reject(err);
  }
}

/**
 * A stop by its user (/stop, the platform's Stop) or the operator. Recorded stopped even when a
 * hard stop or a fence then cuts it before its stop marker is out: re-run, it would answer in full.
 */
export function stopRunning(running: { controller: AbortController; stoppedByUser?: boolean }, reason: string): void {
  running.stoppedByUser = true;
  running.controller.abort(new CodedError('TURN_STOPPED', reason));
}
