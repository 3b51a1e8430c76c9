/** One turn the daemon knows about, running or waiting. */
export interface TrackedTask {
  /** The turn's id: its first inbox item. */
  id: string;
  state: 'queued' | 'running';
  agent: string;
  channel: string;
  scope: string;
  model: string | undefined;
  queued_at: string;
  started_at: string | null;
}

/** As held: times in epoch ms, formatted only when listed (formatting per turn showed in profiles). */
type Held = Omit<TrackedTask, 'queued_at' | 'started_at'> & { queuedAtMs: number; startedAtMs: number | null };

/**
 * Every running and queued turn across all workspaces, for /status, the admin page and
 * shutdown. Lanes add and start tasks; the turn executor says which model serves.
 */
export class TaskTracker {
  readonly #tasks = new Map<string, Held>();
  #events = 0;

  constructor(private readonly agentOf: (channelId: string) => string) {}

  queued(id: string, channel: string, scope: string): void {
    this.#events++;
    this.#tasks.set(id, {
      id,
      state: 'queued',
      agent: this.agentOf(channel),
      channel,
      scope,
      model: undefined,
      queuedAtMs: Date.now(),
      startedAtMs: null,
    });
  }

  started(id: string): void {
    this.#events++;
    const t = this.#tasks.get(id);
    if (t) Object.assign(t, { state: 'running', startedAtMs: Date.now(), agent: this.agentOf(t.channel) });
  }

  setModel(id: string, model: string): void {
    const t = this.#tasks.get(id);
    if (t) t.model = model;
  }

  finished(id: string): void {
    this.#events++;
    this.#tasks.delete(id);
  }

  /** Turns queued or running. */
  get size(): number {
    return this.#tasks.size;
  }

  /** Moves whenever a turn is queued, started or ends: an unchanged value means nothing happened. */
  get events(): number {
    return this.#events;
  }

  /** Turns waiting in one conversation. */
  queuedIn(scope: string): number {
    let n = 0;
    for (const t of this.#tasks.values()) if (t.scope === scope && t.state === 'queued') n++;
    return n;
  }

  list(): TrackedTask[] {
    return [...this.#tasks.values()]
      .sort((a, b) => (a.state === b.state ? a.queuedAtMs - b.queuedAtMs : a.state === 'running' ? -1 : 1))
      .map(({ queuedAtMs, startedAtMs, ...t }) => ({
        ...t,
        queued_at: new Date(queuedAtMs).toISOString(),
        started_at: startedAtMs === null ? null : new Date(startedAtMs).toISOString(),
      }));
  }
}
