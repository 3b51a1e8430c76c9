/**
 * Spending limits that hold under concurrency: a caller reserves what it may spend before
 * it spends (a model call's estimate), and settles with what it did spend after. A
 * reservation that would take a limit's window past its limit is refused, so turns running
 * at the same time cannot each see room that only one of them has. The daily budget uses it
 * (src/workspace/usage-hooks.ts); per-user or per-channel quotas are further keys on the same
 * mechanism. One node keeps the holds in memory (one process runs every turn) and what each
 * window settled in SQLite too (src/store/spend-windows.ts), so a sender's count survives a
 * restart; cluster mode keeps both in PostgreSQL, reserved atomically
 * (src/cluster/pg-reservations.ts).
 */
export interface SpendQuota {
  /** What the limit counts, e.g. `daily:<agent>`. */
  key: string;
  /** The start of the current window (ms since the epoch); a new window starts empty. */
  windowStartMs: number;
  /** The most the window may spend. */
  limit: number;
  /**
   * What the window had spent before this mechanism counted it (the usage ledger): read
   * once, when the window is first seen.
   */
  recorded(): Promise<number>;
}

/** A granted reservation; settle it exactly once, with the real amount (0 when nothing was spent). */
export interface SpendHold {
  readonly amount: number;
  settle(actual: number): Promise<void>;
}

/** Refused: what the window has settled, and what reservations in progress hold. */
export type Reservation = { granted: true; hold: SpendHold } | { granted: false; settled: number; held: number };

/** A window's counters as they stand. */
export interface WindowStanding {
  key: string;
  settled: number;
  held: number;
}

export interface SpendReservations {
  /** Reserves `amount` in the quota's window, when `fits` says so; otherwise refused with what is settled and held. */
  reserve(quota: SpendQuota, amount: number): Promise<Reservation>;
  /** The window's counters; undefined when nothing reserved in it yet (the ledger may still hold spend). */
  peek(key: string, windowStartMs: number): Promise<WindowStanding | undefined>;
  /** The `limit` windows starting `windowStartMs` whose key starts with `prefix`, most settled first (quotas' top users and channels). */
  top(prefix: string, windowStartMs: number, limit: number): Promise<WindowStanding[]>;
}

/**
 * Whether a reservation is granted. One that keeps the window within its limit is; one that
 * would cross it is refused while other reservations are held, and granted only alone, while
 * anything is left: a turn whose most likely cost exceeds what is left may still run
 * (refusing it would refuse every such turn for the rest of the day), and so the limit is
 * passed by at most one reservation.
 */
export function fits(settled: number, held: number, amount: number, limit: number): boolean {
  return settled + held + amount <= limit || (held === 0 && settled < limit);
}

/** A hold whose `settle` acts once; later calls change nothing. */
export function holdOnce(amount: number, settle: (actual: number) => Promise<void>): SpendHold {
  let open = true;
  return {
    amount,
    settle: async (actual) => {
      if (!open) return;
      open = false;
      await settle(actual);
    },
  };
}

/** No window is longer than a day (UTC days and hours): one that started a day before the newest is over. */
const LONGEST_WINDOW_MS = 86_400_000;
const SWEEP_MIN = 1024;

interface Window {
  startMs: number;
  settled: number;
  held: number;
}

/**
 * Where one node keeps what its windows settled, across restarts. Holds are not kept: a turn
 * cut by a crash is run again after the restart and reserves again.
 */
export interface SettledWindows {
  /** What the window settled as last written; undefined when it was never written. */
  read(key: string, windowStartMs: number): number | undefined;
  /** Records the window's settled total (written behind; the latest write wins). */
  write(key: string, windowStartMs: number, settled: number): void;
  /** The `limit` windows starting `windowStartMs` whose key starts with `prefix`, most settled first. */
  top(prefix: string, windowStartMs: number, limit: number): WindowStanding[];
}

/**
 * The holds of one process, in memory: on one node every turn runs here, so this is exact.
 * With `durable`, each window starts from what it had settled before a restart (read once)
 * and each settle is written there.
 */
export class LocalReservations implements SpendReservations {
  readonly #windows = new Map<string, { startMs: number; ready: Promise<Window> }>();
  /** The map's size at which ended windows are next swept (quota keys are per sender: many come and go). */
  #sweepAt = SWEEP_MIN;

  constructor(private readonly durable?: SettledWindows) {}

  async reserve(quota: SpendQuota, amount: number): Promise<Reservation> {
    const w = await this.#window(quota);
    if (!fits(w.settled, w.held, amount, quota.limit)) return { granted: false, settled: w.settled, held: w.held };
    w.held += amount;
    return {
      granted: true,
      hold: holdOnce(amount, async (actual) => {
        w.held -= amount;
        w.settled += actual;
        if (actual !== 0) this.durable?.write(quota.key, w.startMs, w.settled);
      }),
    };
  }

  async peek(key: string, windowStartMs: number): Promise<WindowStanding | undefined> {
    const known = this.#windows.get(key);
    if (known?.startMs !== windowStartMs) {
      const settled = this.durable?.read(key, windowStartMs);
      return settled === undefined ? undefined : { key, settled, held: 0 };
    }
    const w = await known.ready;
    return { key, settled: w.settled, held: w.held };
  }

  async top(prefix: string, windowStartMs: number, limit: number): Promise<WindowStanding[]> {
    const rows: WindowStanding[] = [];
    for (const [key, entry] of this.#windows) {
      if (!key.startsWith(prefix) || entry.startMs !== windowStartMs) continue;
      const w = await entry.ready.catch(() => undefined);
      if (w) rows.push({ key, settled: w.settled, held: w.held });
    }
    // Windows settled before a restart and not reserved in since.
    const seen = new Set(rows.map((r) => r.key));
    for (const r of this.durable?.top(prefix, windowStartMs, limit) ?? []) if (!seen.has(r.key)) rows.push(r);
    return rows.sort((a, b) => b.settled + b.held - (a.settled + a.held)).slice(0, limit);
  }

  /**
   * The window's counters, seeded from `recorded` once however many reserve at once; a
   * window that has ended is replaced (holds still open settle into the old one, unseen).
   */
  #window(quota: SpendQuota): Promise<Window> {
    const known = this.#windows.get(quota.key);
    if (known?.startMs === quota.windowStartMs) return known.ready;
    if (this.#windows.size >= this.#sweepAt) this.#sweep(quota.windowStartMs);
    const ready = (async () => {
      const settled = this.durable?.read(quota.key, quota.windowStartMs) ?? (await quota.recorded());
      return { startMs: quota.windowStartMs, settled, held: 0 };
    })();
    const entry = { startMs: quota.windowStartMs, ready };
    this.#windows.set(quota.key, entry);
    // A failed read is tried again by the next reservation.
    ready.catch(() => {
      if (this.#windows.get(quota.key) === entry) this.#windows.delete(quota.key);
    });
    return ready;
  }

  /** Forgets windows that have ended; sweeps again once the map has doubled, so the cost per reservation stays constant. */
  #sweep(newestStartMs: number): void {
    for (const [key, entry] of this.#windows) if (entry.startMs + LONGEST_WINDOW_MS <= newestStartMs) this.#windows.delete(key);
    this.#sweepAt = Math.max(SWEEP_MIN, 2 * this.#windows.size);
  }
}
