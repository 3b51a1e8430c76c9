export interface KeyedBatchOptions<T> {
  /** At most this many items run at once. */
  limit: number;
  /** Items of one key run one after the other, in the order given; other keys' meanwhile. */
  keyOf: (item: T) => string;
  /** Asked before each start: false starts nothing more (the ones running still finish). */
  go: () => boolean;
  /** Runs one item; a rejection starts nothing more and is returned as `failure`. */
  run: (item: T) => Promise<void>;
}

export interface KeyedBatchResult<T> {
  /** The items never started, in the order given. */
  notStarted: T[];
  /** The first rejection of `run`, if any (boxed: a rejection may carry any value, even undefined). */
  failure?: { err: unknown };
}

/**
 * Runs a batch with at most `limit` items at once, those of one key strictly one after the
 * other in the order given. A free slot goes to the earliest item whose key has nothing
 * running, so an item starts at the latest once every item before it has settled: the batch
 * takes no longer than its items would one after another. Resolves, never rejects, once
 * every item it started has settled.
 */
export async function runKeyedBatch<T>(items: readonly T[], o: KeyedBatchOptions<T>): Promise<KeyedBatchResult<T>> {
  const waiting = [...items];
  const busy = new Set<string>();
  const running = new Set<Promise<void>>();
  let failure: { err: unknown } | undefined;
  const startFree = (): void => {
    // The first waiting item of a key is that key's next: a later one never passes it.
    for (let i = 0; i < waiting.length && running.size < o.limit && !failure && o.go(); ) {
      const item = waiting[i]!;
      const key = o.keyOf(item);
      if (busy.has(key)) {
        i++;
        continue;
      }
      waiting.splice(i, 1);
      busy.add(key);
      // Settles only after its key and slot are free again, so the loop below sees them free.
      const done: Promise<void> = o
        .run(item)
        .catch((err: unknown) => {
          failure ??= { err };
        })
        .finally(() => {
          busy.delete(key);
          running.delete(done);
        });
      running.add(done);
    }
  };
  startFree();
  while (running.size) {
    await Promise.race(running);
    startFree();
  }
  return { notStarted: waiting, ...(failure ? { failure } : {}) };
}
