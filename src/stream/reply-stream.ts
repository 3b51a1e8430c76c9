import type { AgentEvent, TurnEnding } from '../contracts/agent-events.js';
import type { SentAt } from '../contracts/channel.js';
import { ChannelError, errorMessage, isRetryable, refusesChat } from '../contracts/errors.js';
import { linkAbort, unlinkAbort } from '../util/linked-abort.js';
import { isRateLimit, newPacing, pace, sleepUntil, type Pacing } from './pacer.js';
import { isBackgroundReply } from '../contracts/tools.js';
import type { ReplyResult, ReplyStreamOptions } from './reply-options.js';
import { backgroundNote, draftChunks, finalChunks } from './reply-text.js';
import { TURN_ENDED, TypingIndicator } from './typing.js';
import { firstUnshown, sentRefs, showsAll, showsChunk, type Shown } from './shown.js';
import { ToolProgressState } from './tool-progress.js';
import { NativeSlot } from './native-slot.js';

export { STOP_MARKER } from './reply-text.js';
export type { ReplyResult, ReplyStreamOptions } from './reply-options.js';
export { TYPING_GRACE_MS } from './typing.js';

/**
 * One per turn: turns AgentEvents into a live platform draft. Single-flight (one request
 * in flight), newest text each time, at least the edit interval apart, slower after a
 * 429, chunked at the platform limit without splitting code fences, and the final text
 * always lands unless the hard deadline passes.
 */
export class ReplyStream {
  readonly #o: ReplyStreamOptions;
  readonly #pacing: Pacing;
  readonly #shown: Shown[];
  #text = '';
  /** The running tools: a line in the text, or given to a native stream that shows them (src/stream/tool-progress.ts). */
  readonly #tools: ToolProgressState;
  #ending: TurnEnding | undefined;
  #draftsEnabled: boolean;
  #requests = 0;
  /** When the last step's send or edit went out, if its transport could tell (the final edit's floor counts from it). */
  #sent: SentAt = {};
  #wake: (() => void) | undefined;
  #dirty = false;
  /** Up while the turn runs with nothing shown (src/stream/typing.ts). */
  #typingIndicator: TypingIndicator | undefined;
  /**
   * Ends the wait the loop is in (a draft's pace slot, other replies' first messages) when the
   * turn ends, so the final text goes at once; the hard stop ends it through #signal. A function
   * the wait hands over, not a controller: an AbortController's listener table cost every turn ~300 bytes.
   */
  #interrupt: (() => void) | undefined;
  readonly #onWake = (wake: () => void): void => void (this.#interrupt = wake);
  /**
   * The hard stop as this reply's own signal, every wait and request of the reply listening here:
   * a listener added to the one signal all turns share walks its whole list, a thousand times the
   * cost with a thousand replies; a linked controller (src/util/linked-abort.ts) joins it in O(1).
   */
  readonly #stop = new AbortController();
  readonly #signal = this.#stop.signal;
  /** Whether the user sees any text yet; typing stops then. */
  #visible = false;
  /** Ends this reply's wait in `firstVisible` (set while it has text and nothing shown). */
  #releaseFirst: (() => void) | undefined;
  /** The native stream, where the reply uses one (src/stream/native-slot.ts). */
  readonly #ns: NativeSlot;
  readonly #done: Promise<ReplyResult>;

  constructor(options: ReplyStreamOptions) {
    this.#o = options;
    // Unlinked when the reply is done (#run).
    linkAbort(options.signal, this.#stop);
    const floor = options.capabilities.minEditIntervalMs;
    this.#pacing = newPacing(Math.max(floor, options.editIntervalMs ?? floor), floor);
    this.#shown = (options.existingRefs ?? []).map((ref) => ({ ref, text: undefined }));
    this.#draftsEnabled = options.streamMode === 'partial';
    this.#tools = new ToolProgressState(options.showToolProgress);
    const nativeWanted = options.capabilities.nativeStream && options.transport.openNativeStream !== undefined;
    this.#ns = new NativeSlot(nativeWanted && this.#draftsEnabled && this.#shown.length === 0, () => this.#tools.noStreamShows());
    if (options.capabilities.typing)
      this.#typingIndicator = new TypingIndicator(options.capabilities.typingRefreshMs ?? 5000, () => {
        if (this.#ending || this.#visible || this.#signal.aborted) return false;
        // Text waiting for its first message (a busy daemon, a 429's hold): that message is
        // what the user needs, and a typing request would only queue in front of it.
        if (!this.#textPending()) this.#typingIndicator?.track(this.#o.transport.typing(this.#o.target, { signal: this.#signal }));
        return true;
      });
    this.#done = this.#run();
  }

  /** Feeds one agent event. Terminal events end the stream. */
  push(event: AgentEvent): void {
    if (this.#ending) return;
    switch (event.type) {
      case 'text_delta':
        this.#text += event.text;
        if (!this.#visible && !this.#releaseFirst && this.#textPending()) this.#releaseFirst = this.#o.firstVisible?.enter();
        break;
      case 'tool_start':
      case 'tool_log':
      case 'tool_end':
        // The progress line (or the stream's task) names the tool and its latest progress note (MCP progress).
        if (!this.#tools.push(event)) return;
        // A call that went on in the background: the user is told its result will follow.
        if (event.type === 'tool_end' && isBackgroundReply(event.output)) this.#text += backgroundNote(this.#text, event.name);
        break;
      case 'done':
      case 'error':
      case 'cancelled':
        this.#ending = event;
        this.#tools.endAll(event);
        this.#typingIndicator?.stop();
        this.#interrupt?.();
        break;
      default:
        return;
    }
    this.#dirty = true;
    // Without drafts only the ending moves the loop: a wake per token would turn it for nothing.
    if (this.#draftsEnabled || this.#ending) this.#wake?.();
  }

  /** Resolves when the final text has landed (or could not by the deadline). */
  finished(): Promise<ReplyResult> {
    return this.#done;
  }

  get text(): string {
    return this.#text;
  }

  /** Drafts on, the platform shows them as they grow, and text: the first message is on its way (without edits, typing until a whole chunk). */
  #textPending(): boolean {
    return this.#draftsEnabled && this.#o.capabilities.editsDrafts && this.#text.trim() !== '';
  }

  /** What the messages should show now (src/stream/reply-text.ts). */
  #desired(final: boolean): string[] {
    return final
      ? finalChunks(this.#o.capabilities, this.#text, this.#ending!)
      : draftChunks(this.#o.capabilities, this.#text, this.#tools.line(this.#ns.showsTools));
  }

  #shownText(): void {
    if (!this.#visible) this.#o.onVisible?.();
    this.#visible = true;
    this.#releaseFirst?.();
    this.#typingIndicator?.stop();
  }

  /**
   * A draft that would edit what the user already sees waits while another reply of the
   * daemon has nothing shown yet (or until this turn ends: the final text never waits).
   * True when it waited long enough to be a burst (src/stream/first-visible.ts), not one request in flight.
   */
  async #firstVisibleOfOthers(): Promise<boolean> {
    const gate = this.#o.firstVisible;
    if (gate === undefined || !this.#visible || this.#ending) return false;
    const long = await gate.heldLong(this.#signal, this.#onWake);
    this.#interrupt = undefined;
    return long;
  }

  /**
   * One native-stream request toward `desired`, while the reply fits in one message;
   * undefined when the native stream is not in use. A 429 pauses the native stream for what
   * the platform asked (the caller paces it) and keeps it; any other failure falls back to
   * send + edit for the rest of the turn: the next step sends the whole text as a normal message.
   * A stream that shows the tools gets what changed with the step's text (an update with no new text).
   */
  async #nativeStep(desired: string[], final: boolean): Promise<boolean | undefined> {
    if (this.#ns.state === 'off' || this.#shown.length > 0) return undefined;
    let progress = this.#tools.changes(this.#ns.showsTools);
    if ((desired.length === 0 && (final || !progress)) || this.#ns.state === 'stopped') return false;
    const { transport, target } = this.#o;
    const signal = this.#signal;
    try {
      if (this.#ns.state === 'unopened') {
        // A reply that ends, or outgrows one message, before its first draft needs no stream; where the chat has
        // none (a group, a client without corrections) nothing went out. Either way the text goes as messages in
        // this same step, not an interval later; if the turn ended while the open was pending, as its final text, whole.
        if (!final && desired.length === 1) {
          // An open may post the message (a chat stream's start): as any new message, once
          // its id can be stored; a turn that ended meanwhile opens nothing.
          await this.#o.beforeSend?.(signal);
          this.#requests++;
          if (!this.#ending && !signal.aborted) this.#ns.stream = await transport.openNativeStream!(target, { signal });
          if (!this.#ns.stream) this.#requests--;
        }
        if (!this.#ns.stream) {
          this.#ns.state = 'off';
          return this.#ending && !final ? false : undefined;
        }
        this.#ns.state = 'active';
        this.#ns.keepRef(this.#o);
        if (!this.#ns.stream.update) {
          // A stream that shows nothing before its end (a room without corrections): no drafts,
          // no requests: its user sees typing, no other reply waits for it, the end goes at once.
          this.#draftsEnabled = false;
          this.#releaseFirst?.();
          return false;
        }
        // Planned before the stream was known: its tools leave the text.
        if (this.#ns.showsTools) [desired, progress] = [this.#desired(final), this.#tools.changes(true)];
      }
      if (final || desired.length > 1) {
        // Done, or the text outgrew one message: the native stream becomes its first message.
        this.#requests++;
        await this.#o.beforeSend?.(signal);
        const ref = await this.#ns.stream!.finish(desired[0]!, { signal, final: final && desired.length === 1, progress });
        this.#tools.taken(progress);
        this.#ns.state = 'off';
        this.#shown[0] = { ref, text: desired[0] };
        this.#shownText();
        this.#o.onRefs?.(sentRefs(this.#shown));
        return true;
      }
      const text = desired[0] ?? '';
      if ((this.#ns.shown === text && !progress) || !this.#ns.stream!.update) return false;
      this.#requests++;
      await this.#ns.stream!.update(text, { signal, progress });
      this.#tools.taken(progress);
      this.#ns.shown = text;
      this.#ns.keepRef(this.#o);
      this.#shownText();
      return true;
    } catch (err) {
      // Switching modes on a 429 would turn the draft into a message mid-answer and draw
      // more 429s with the edits that follow: wait instead, then go on drafting.
      // A stream that could not show the tools took nothing of the call: the line is back in the text, planned again at once.
      if (isRateLimit(err) || (err instanceof ChannelError && err.code === 'CHANNEL_FORMAT_REFUSED') || this.#tools.refusedBy(err, progress)) throw err;
      this.#o.onError?.(err, final ? 'final' : 'draft');
      // Its user stopped the answer on the platform: nothing more of it goes, in any form (no fallback to messages).
      if (err instanceof ChannelError && err.code === 'REPLY_STOPPED_BY_USER') return !(this.#ns.state = 'stopped');
      this.#ns.state = 'off';
      // Gone on without: a stream still open ends itself (release); its own message, where it posted one, carries the rest (edited, not posted again).
      this.#ns.stream?.release?.();
      if (this.#ns.stream?.ref) this.#shown[0] = { ref: this.#ns.stream.ref, text: undefined };
      this.#o.onFallback?.();
      return true;
    }
  }

  /** One request toward `desired`; false when already there. */
  async #step(desired: string[], final: boolean): Promise<boolean> {
    this.#sent = {};
    const native = await this.#nativeStep(desired, final);
    if (native !== undefined) return native;
    const { transport, target } = this.#o;
    const signal = this.#signal;
    const isLast = (i: number) => final && i === desired.length - 1;
    for (let i = 0; i < desired.length; i++) {
      const shown = this.#shown[i];
      if (showsChunk(shown, desired[i]!)) continue;
      this.#requests++;
      if (shown?.ref) {
        try {
          await transport.edit(shown.ref, desired[i]!, { signal, final: isLast(i), sentAt: this.#sent });
        } catch (err) {
          if (isRetryable(err)) throw err;
          // The platform will not edit this one (deleted, too old): send the text anew.
          this.#o.onError?.(err, final ? 'final' : 'draft');
          this.#shown[i] = { ref: undefined, text: undefined };
          return true;
        }
        shown.text = desired[i];
        // A reply resumed after a restart edits the messages it had: its user sees text again.
        this.#releaseFirst?.();
      } else {
        const key = this.#o.replyKey ? { idempotencyKey: `${this.#o.replyKey}:${i}` } : {};
        await this.#o.beforeSend?.(signal);
        const ref = await transport.send(target, desired[i]!, { signal, final: isLast(i), sentAt: this.#sent, ...key });
        this.#shown[i] = { ref, text: desired[i] };
        this.#shownText();
        this.#o.onRefs?.(sentRefs(this.#shown));
      }
      return true;
    }
    if (final && this.#shown.length > desired.length) {
      const extra = this.#shown.pop()!;
      if (extra.ref) {
        this.#requests++;
        try {
          await transport.delete(extra.ref, { signal });
        } catch (err) {
          if (isRetryable(err)) {
            this.#shown.push(extra);
            throw err;
          }
        }
        this.#o.onRefs?.(sentRefs(this.#shown));
      }
      return true;
    }
    return false;
  }

  /** Whether the next final step sends a new message (a native stream's end that is one, or a chunk not yet sent) rather than an edit or a delete. */
  #nextIsNewMessage(desired: string[]): boolean {
    if (this.#ns.state === 'active') return this.#ns.stream?.finishSendsMessage === true;
    if (this.#ns.state === 'unopened' && this.#shown.length === 0) return true;
    const i = firstUnshown(this.#shown, desired);
    return i >= 0 && !this.#shown[i]?.ref;
  }

  #changed(): Promise<void> {
    if (this.#dirty || this.#ending) return Promise.resolve();
    return new Promise((resolve) => (this.#wake = resolve));
  }

  async #run(): Promise<ReplyResult> {
    try {
      while (!this.#ending) {
        await this.#changed();
        this.#wake = undefined;
        this.#dirty = false;
        if (this.#ending || !this.#draftsEnabled) continue;
        await sleepUntil(this.#pacing.nextAtMs, this.#signal, this.#onWake);
        this.#interrupt = undefined;
        if (await this.#firstVisibleOfOthers()) {
          // Held back by a burst: the draft goes one interval later, so a turn that ends meanwhile sends its
          // final text at once, not a draft that would push the final edit a floor later.
          this.#pacing.nextAtMs = Date.now() + this.#pacing.intervalMs;
          this.#dirty = true;
          continue;
        }
        if (this.#ending || this.#signal.aborted) continue;
        try {
          // A slot with nothing new sends nothing and is no request to pace from: text after
          // a pause goes as soon as the last request that went out allows. Where drafts are not
          // edited the growing last chunk shows nothing until it is whole, so most slots are
          // empty: the next look still waits an interval (each look splits the whole text).
          if (await this.#step(this.#desired(false), false)) {
            this.#dirty = true;
            pace(this.#pacing, undefined, Date.now(), this.#sent.atMs);
          } else if (!this.#o.capabilities.editsDrafts) this.#pacing.nextAtMs = Date.now() + this.#pacing.intervalMs;
        } catch (err) {
          const outcome = pace(this.#pacing, err, Date.now());
          if (outcome === 'rate_limited') this.#o.onRateLimited?.();
          else if (outcome !== 'replan') this.#o.onError?.(err, 'draft');
          // After three failed drafts in a row only the final text is attempted; at once after a
          // refusal of this chat (the bot blocked, kicked, out of its window), which must not
          // hold other replies' drafts (FirstVisibleFirst) while it is tried again.
          if (this.#pacing.consecutiveFailures >= 3 || refusesChat(err)) {
            this.#draftsEnabled = false;
            this.#releaseFirst?.();
          }
          this.#dirty = true;
        }
      }
      return await this.#final();
    } finally {
      // A native stream the reply leaves open (its end not delivered, or cut) ends itself: nothing else would end it.
      if (this.#ns.state === 'active') this.#ns.stream?.release?.();
      // What the reply left in flight (a typing request never awaited) is of no use now and goes with it; then nothing
      // of the reply waits on the hard stop any more. (Only then: an abort is an event dispatched, and most replies leave nothing behind.)
      if (this.#typingIndicator?.inFlight) this.#stop.abort(TURN_ENDED);
      unlinkAbort(this.#o.signal, this.#stop);
    }
  }

  async #final(): Promise<ReplyResult> {
    this.#typingIndicator?.stop();
    // From here on only the final text goes, and it waits for no other reply.
    this.#releaseFirst?.();
    const deadline = Date.now() + this.#o.finalDeadlineMs;
    let delivered = true;
    for (;;) {
      if (this.#signal.aborted) {
        delivered = false;
        break;
      }
      // Planned each time: a platform may change its limits mid-reply (a refused format).
      const desired = this.#desired(true);
      // Nothing left to send: done at once, without waiting out the edit interval.
      if (this.#ns.state === 'stopped' || (this.#ns.state !== 'active' && showsAll(this.#shown, desired))) break;
      // The last word, at once: a final that is a new message waits only for what a 429 (or a
      // failure's backoff) asked; a final edit waits for the platform's floor, never for the
      // channel's wider interval or one a 429 widened.
      const readyAtMs = this.#nextIsNewMessage(desired) ? this.#pacing.holdAtMs : this.#pacing.floorAtMs;
      if (readyAtMs > Date.now()) await sleepUntil(Math.min(readyAtMs, deadline), this.#signal);
      try {
        if (!(await this.#step(desired, true))) break;
        pace(this.#pacing, undefined, Date.now(), this.#sent.atMs);
      } catch (err) {
        const outcome = pace(this.#pacing, err, Date.now());
        if (outcome === 'replan') continue;
        if (outcome === 'rate_limited') this.#o.onRateLimited?.();
        else this.#o.onError?.(err, 'final');
        if (!isRetryable(err) || this.#pacing.floorAtMs > deadline) {
          delivered = false;
          this.#o.onError?.(new Error(`final reply not delivered: ${errorMessage(err)}`), 'final');
          break;
        }
      }
    }
    const refs = sentRefs(this.#shown);
    if (delivered && refs.length && this.#o.transport.finalize) {
      await this.#o.transport.finalize(refs, { signal: this.#signal }).catch((err) => this.#o.onError?.(err, 'final'));
    }
    return { refs, requests: this.#requests, delivered };
  }
}
