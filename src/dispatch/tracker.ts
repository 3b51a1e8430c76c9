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

/**
 * Every running and queued turn across all workspaces, for /status, the admin page and
 * shutdown. Lanes add and start tasks; the turn executor says which model serves.
 */
export class TaskTracker {
  readonly #tasks = new Map<string, TrackedTask>();

  constructor(private readonly agentOf: (channelId: string) => string) {}

  queued(id: string, channel: string, scope: string): void {
    this.#tasks.set(id, {
      id,
      state: 'queued',
      agent: this.agentOf(channel),
      channel,
      scope,
      model: undefined,
      queued_at: new Date().toISOString(),
      started_at: null,
    });
  }

  started(id: string): void {
    const t = this.#tasks.get(id);
    if (t) Object.assign(t, { state: 'running', started_at: new Date().toISOString(), agent: this.agentOf(t.channel) });
  }

  setModel(id: string, model: string): void {
    const t = this.#tasks.get(id);
    if (t) t.model = model;
  }

  finished(id: string): void {
    this.#tasks.delete(id);
  }

  /** Turns waiting in one conversation. */
  queuedIn(scope: string): number {
    let n = 0;
    for (const t of this.#tasks.values()) if (t.scope === scope && t.state === 'queued') n++;
    return n;
  }

  list(): TrackedTask[] {
    return [...this.#tasks.values()]
      .map((t) => ({ ...t }))
      .sort((a, b) => (a.state === b.state ? a.queued_at.localeCompare(b.queued_at) : a.state === 'running' ? -1 : 1));
  }
}
