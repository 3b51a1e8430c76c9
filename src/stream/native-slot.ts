import type { NativeStream } from '../contracts/native-stream.js';
import type { ReplyStreamOptions } from './reply-options.js';

/** A reply's native stream (src/stream/reply-stream.ts #nativeStep): where it is, and what it shows. */
export class NativeSlot {
  #state: 'unopened' | 'active' | 'off' | 'stopped';
  stream: NativeStream | undefined;
  /** The text the stream was last given. */
  shown = '';
  #refKept = false;
  /** Told once it is known that no stream of the reply will show the tools: what is kept for one is then waste. */
  readonly #onNoTools: () => void;

  /** `onNoTools`: called when the slot settles on not showing the tools (the state is then never 'active' with a stream that does). */
  constructor(wanted: boolean, onNoTools: () => void) {
    this.#onNoTools = onNoTools;
    this.#state = wanted ? 'unopened' : 'off';
    if (!wanted) onNoTools();
  }

  /** 'unopened' until the first text, 'off' when unused, done, or failed; 'stopped' by its user: nothing more goes. */
  get state(): 'unopened' | 'active' | 'off' | 'stopped' {
    return this.#state;
  }

  /** 'off' and 'stopped' are for good, and the stream is known by 'active': from any of them on, whether the tools are shown is settled. */
  set state(state: 'active' | 'off' | 'stopped') {
    this.#state = state;
    if (!this.showsTools) this.#onNoTools();
  }

  /** The stream in use shows the running tools itself (NativeStream.showsToolProgress), not the text. */
  get showsTools(): boolean {
    return this.state === 'active' && this.stream?.showsToolProgress === true;
  }

  /** Stores the stream's own message once it is known: at the open, or after the first chunk (whose answer names it). */
  keepRef(o: Pick<ReplyStreamOptions, 'onRefs'>): void {
    if (this.#refKept || this.stream?.ref === undefined) return;
    this.#refKept = true;
    o.onRefs?.([this.stream.ref]);
  }
}
