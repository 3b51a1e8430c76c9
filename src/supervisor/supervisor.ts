import type { Logger } from '../observe/logger.js';
import type { Metrics } from '../observe/metrics.js';
import { SupervisedChannel, type ChannelStatus, type SupervisedChannelOptions } from './channel.js';

export type { ChannelStatus };

/** One supervised listener per channel; channels start and stop independently. */
export class Supervisor {
  readonly #channels = new Map<string, SupervisedChannel>();
  /**
   * Each channel's connection count, kept past its removal: a channel restarted by a reload
   * goes on from where it was, so "connection 4" reads as "reconnected 3 times since start".
   */
  readonly #connections = new Map<string, number>();

  constructor(
    private readonly log: Logger,
    private readonly metrics?: Metrics,
  ) {}

  /** Starts supervising a channel; its first attempt runs in the background. */
  add(options: Omit<SupervisedChannelOptions, 'log' | 'onState' | 'connectionsBefore' | 'onConnection'>): SupervisedChannel {
    const ch = new SupervisedChannel({
      ...options,
      log: this.log,
      onState: (s) => this.metrics?.channelState.set({ channel: s.id }, s.state === 'connected' ? 1 : 0),
      connectionsBefore: this.#connections.get(options.id) ?? 0,
      onConnection: (n) => {
        this.#connections.set(options.id, n);
        this.metrics?.channelConnections.inc({ channel: options.id });
      },
    });
    this.#channels.set(options.id, ch);
    ch.start();
    return ch;
  }

  /** Stops a channel's listener (abort, up to `graceMs`, then drop). */
  async remove(id: string, graceMs: number): Promise<void> {
    const ch = this.#channels.get(id);
    if (!ch) return;
    this.#channels.delete(id);
    await ch.stop(graceMs);
    this.metrics?.channelState.remove({ channel: id });
  }

  statuses(): ChannelStatus[] {
    return [...this.#channels.values()].map((c) => c.status());
  }

  /** True once every channel is past its first connect attempt. */
  ready(): boolean {
    return [...this.#channels.values()].every((c) => c.pastFirstAttempt);
  }

  /** Resolves when every current channel's first attempt has settled. */
  async firstAttempts(): Promise<void> {
    await Promise.all([...this.#channels.values()].map((c) => c.firstAttempt));
  }

  async stopAll(graceMs: number): Promise<void> {
    await Promise.all([...this.#channels.keys()].map((id) => this.remove(id, graceMs)));
  }
}
