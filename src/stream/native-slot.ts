import type { NativeStream } from '../contracts/native-stream.js';
import type { ReplyStreamOptions } from './reply-options.js';

/** A reply's native stream (src/stream/reply-stream.ts #nativeStep): where it is, and what it shows. */
export class NativeSlot {
  /** 'unopened' until the first text, 'off' when unused, done, or failed; 'stopped' by its user: nothing more goes. */
  state: 'unopened' | 'active' | 'off' | 'stopped';
  stream: NativeStream | undefined;
  /** The text the stream was last given. */
  shown = '';
  #refKept = false;

  constructor(wanted: boolean) {
    this.state = wanted ? 'unopened' : 'off';
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
