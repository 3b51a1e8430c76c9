import type { AgentEvent, TurnEnding } from '../contracts/agent-events.js';
import { ChannelError } from '../contracts/errors.js';
import type { ToolProgress } from '../contracts/native-stream.js';

type ToolEvent = Extract<AgentEvent, { type: 'tool_start' | 'tool_log' | 'tool_end' }>;

/**
 * A reply's running tools (`[[agents]] show_tool_progress`), shown one of two ways: a progress
 * line (`⏳ tool… note`) at the end of the draft text, or, to a native stream that shows tool
 * progress itself (NativeStream.showsToolProgress), each call's state. The stream is given what
 * changed since it last took a step, coalesced (the latest state of each call), so a step is
 * one request however many notes came between two.
 */
export class ToolProgressState {
  readonly #enabled: boolean;
  /** The tool the line names: the one started last, until any ends (parallel calls share one line). */
  #tool: string | undefined;
  /** The progress line while a tool runs, for the text. */
  #line: string | undefined;
  /** Calls started and not ended, by call id, at their latest state (made at the first call: most replies use no tool). */
  #running: Map<string, ToolProgress> | undefined;
  /** What the stream has not taken yet, by call id; each change is a new object, so a change made while a step was in flight stays. */
  #changed: Map<string, ToolProgress> | undefined;
  /** The stream refused the progress (or could no longer show it): the line is in the text for the rest of the reply. */
  #inText = false;
  /** No stream of this reply will show the calls: nothing would take their states, so none is kept (the line is all there is). */
  #unshown = false;

  constructor(enabled: boolean) {
    this.#enabled = enabled;
  }

  /** Takes a tool event; false when it changes nothing the reply shows (a note with no tool running, or progress off). */
  push(event: ToolEvent): boolean {
    if (event.type === 'tool_start') {
      this.#tool = event.name;
      if (this.#enabled) {
        this.#line = `⏳ ${event.name}…`;
        this.#set({ id: event.id, name: event.name, state: 'running' });
      }
      return true;
    }
    if (event.type === 'tool_log') {
      if (!this.#enabled) return false;
      // Each call's note, whichever call the line names: with parallel calls the line names none once
      // one ends, and a stream that shows the calls would keep the others' old notes.
      const call = this.#running?.get(event.id);
      const changed = call !== undefined && this.#set({ ...call, note: event.text });
      if (this.#tool === undefined) return changed;
      this.#line = `⏳ ${this.#tool}… ${event.text}`;
      return true;
    }
    this.#tool = undefined;
    this.#line = undefined;
    const call = this.#running?.get(event.id);
    if (call) this.#end(call, event.error === undefined ? 'done' : 'failed');
    return true;
  }

  /** The turn ended: a call still running ends with it, `done` if the turn ended normally, `failed` otherwise. */
  endAll(ending: TurnEnding): void {
    for (const call of this.#running?.values() ?? []) this.#end(call, ending.type === 'done' ? 'done' : 'failed');
  }

  /** The line for the draft text, unless the stream shows the progress itself. */
  line(streamShows: boolean): string | undefined {
    return streamShows && !this.#inText ? undefined : this.#line;
  }

  /** No stream of this reply will show the calls (none can be opened, or the one in use does not show them, or is done): what was kept goes, and nothing more is. */
  noStreamShows(): void {
    this.#unshown = true;
    this.#running = undefined;
    this.#changed = undefined;
  }

  /** How many call states are kept (running and not yet taken), for tests. */
  get kept(): number {
    return (this.#running?.size ?? 0) + (this.#changed?.size ?? 0);
  }

  /** What to give a stream that shows the progress with its next step; undefined when nothing changed or it no longer shows it. */
  changes(streamShows: boolean): ToolProgress[] | undefined {
    return streamShows && !this.#inText && this.#changed?.size ? [...this.#changed.values()] : undefined;
  }

  /** The stream took `sent`: those changes are shown (a newer change of the same call, made meanwhile, is still to go). */
  taken(sent: readonly ToolProgress[] | undefined): void {
    for (const p of sent ?? []) if (this.#changed?.get(p.id) === p) this.#changed.delete(p.id);
  }

  /** Whether `err` is a stream's refusal of the progress it was given (`sent`): the line then goes back into the text for the rest of the reply. */
  refusedBy(err: unknown, sent: readonly ToolProgress[] | undefined): boolean {
    if (!sent || !(err instanceof ChannelError) || err.code !== 'CHANNEL_PROGRESS_REFUSED') return false;
    this.#inText = true;
    this.#changed = undefined;
    return true;
  }

  /** Whether the change is kept for a stream. */
  #set(call: ToolProgress): boolean {
    if (this.#unshown) return false;
    (this.#running ??= new Map()).set(call.id, call);
    return this.#change(call);
  }

  #end(call: ToolProgress, state: 'done' | 'failed'): void {
    this.#running?.delete(call.id);
    this.#change({ ...call, state });
  }

  /** Kept for a stream only while one may still show it (after a refusal the line is all there is). */
  #change(call: ToolProgress): boolean {
    if (this.#inText) return false;
    (this.#changed ??= new Map()).set(call.id, call);
    return true;
  }
}
