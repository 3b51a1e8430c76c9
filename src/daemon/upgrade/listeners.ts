import type { ChannelAdapter, Deliver } from '../../contracts/channel.js';
import { CodedError } from '../../contracts/errors.js';
import { boundedState } from './protocol.js';
import { boundView } from '../../util/bound-view.js';

type Listen = ChannelAdapter['listen'];

/**
 * How an upgrade moves a channel's listener. `handOver`: the old process stops it before the
 * new one starts its own (a polling or gateway listener: two would conflict) and passes its
 * session. `overlap`: both run for a moment, and what it holds goes over as the old one stops
 * it (socket mode, webhooks, web chat's tabs). `leased` (cluster mode, an exclusive listener):
 * nothing goes over, its lease moves when the old instance lets go of it.
 */
export type ListenerMove = 'handOver' | 'overlap' | 'leased';

/**
 * One channel's listener as an upgrade sees it. In the old process `pause()` stops the
 * platform listener (the supervisor's `listen` call keeps running, parked) and returns what
 * the adapter hands over; `resume()` (the upgrade failed) runs it again. In the new process
 * the first `listen` first waits for `before()` (the old one stopped its listener) and gives
 * the adapter the state it got.
 */
export class ListenerGate {
  readonly adapter: ChannelAdapter;
  readonly #inner: ChannelAdapter;
  #pause: AbortController | undefined;
  #running: Promise<void> | undefined;
  #paused = false;
  #wake: (() => void) | undefined;
  #before: (() => Promise<unknown>) | undefined;

  /** `before`: the new process of an upgrade asks the old one for this listener first. */
  constructor(
    inner: ChannelAdapter,
    readonly move: ListenerMove,
    before?: () => Promise<unknown>,
  ) {
    this.#inner = inner;
    this.#before = before;
    const listen: Listen = (deliver, signal, onConnected, onReconnecting, onStandby) => this.#listen(deliver, signal, onConnected, onReconnecting, onStandby);
    // Everything but listen is the adapter's own, bound to it once (src/util/bound-view.ts).
    this.adapter = boundView(inner, { listen });
  }

  async #listen(...[deliver, signal, onConnected, onReconnecting, onStandby]: Parameters<Listen>): Promise<void> {
    if (this.#before) {
      const take = this.#before;
      this.#before = undefined;
      const state = await take();
      if (signal.aborted) return;
      if (state !== undefined) this.#inner.resumeFrom?.(state);
    }
    while (!signal.aborted) {
      if (this.#paused) {
        await this.#parked(signal);
        continue;
      }
      const pause = new AbortController();
      this.#pause = pause;
      const run = this.#inner.listen(deliver as Deliver, AbortSignal.any([signal, pause.signal]), onConnected, onReconnecting, onStandby);
      this.#running = run.then(
        () => {},
        () => {},
      );
      try {
        await run;
      } catch (err) {
        // Stopped for the hand-over: how the platform client ended does not matter.
        if (!pause.signal.aborted || signal.aborted) throw err;
      } finally {
        this.#pause = undefined;
        this.#running = undefined;
      }
      if (!pause.signal.aborted) return;
    }
  }

  /** Waits (parked, as far as the supervisor knows still listening) until resume() or the real stop. */
  #parked(signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        signal.removeEventListener('abort', done);
        this.#wake = undefined;
        resolve();
      };
      this.#wake = done;
      signal.addEventListener('abort', done, { once: true });
    });
  }

  /** Old process: stops the platform listener and waits until it ended; what the adapter hands over (`handOver` only: an `overlap` one gave it before, overlapState). */
  async pause(): Promise<unknown> {
    this.#paused = true;
    this.#pause?.abort(new CodedError('UPGRADE_HANDED_OVER', `channel "${this.#inner.id}" was handed over to the new process`));
    await this.#running;
    return this.move === 'handOver' ? boundedState(this.#inner.handoverState?.()) : undefined;
  }

  /** Old process, an `overlap` listener: its state while it still runs, just before pause(). */
  overlapState(): unknown {
    return this.move === 'overlap' ? boundedState(this.#inner.handoverState?.()) : undefined;
  }

  /** Old process, an `overlap` listener, once the turns still running at the hand-over ended: what they added since overlapState(). */
  lateState(): unknown {
    return this.move === 'overlap' ? boundedState(this.#inner.lateHandoverState?.()) : undefined;
  }

  /** New process: the old one's state of an `overlap` listener, given while this one runs. */
  restore(state: unknown): void {
    if (this.move === 'overlap') this.#inner.resumeFrom?.(state);
  }

  /** Old process, after a failed upgrade: the listener runs again. */
  resume(): void {
    this.#paused = false;
    this.#wake?.();
  }
}
