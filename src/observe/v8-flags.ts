import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { CodedError } from '../contracts/errors.js';

/**
 * The V8 flags of the daemon's memory policy, set by channeld itself from CHANNELD_V8_FLAGS
 * instead of on node's command line (the systemd unit and `npm start` set the variable).
 *
 * Why not node's command line: V8 refuses a code cache made under other flags, and Node's
 * built-in modules (http, tls, zlib, ...) ship with one made under V8's defaults. With
 * `--heap-growing-percent=10` or `--expose-gc` on the command line every built-in module the
 * daemon loads was compiled from source at each start: `channeld check` ran a third more
 * instructions, 832 M against 621 M (docs/PERFORMANCE.md, thirty-fourth round). `--max-semi-space-size` stays on
 * the command line (the young generation is sized when the heap is made); V8 12 (Node 22)
 * counts it against the cache too, V8 13 and later (Node 24, 26) do not.
 *
 * - `--expose-gc` gives the memory trimmer its collection. The flag is turned on only while a
 *   fresh context is made (V8 installs `gc` in contexts made while it is on) and off again at
 *   once, so the flags match the cache again; the context costs about 0.4 MB.
 * - `--heap-growing-percent=N` is set once the daemon is ready: it bounds the old generation's
 *   growth under load, and V8 reads it each time it sizes the heap. From then on the flags
 *   differ from the cache's, so a built-in module first loaded later compiles from source once.
 *
 * A flag given on node's command line wins: `--expose-gc` there is used as it is, and an explicit
 * `--heap-growing-percent` (0 is V8's own growth) is left alone.
 */
export const V8_FLAGS_ENV = 'CHANNELD_V8_FLAGS';

/** The largest heap growing percent accepted: at 200 the old generation may already grow to three times what was live. */
const MAX_HEAP_GROWING_PERCENT = 200;

export interface V8Flags {
  /** `--heap-growing-percent=N`: set once the daemon is ready. */
  heapGrowingPercent?: number;
  /** `--expose-gc`: the memory trimmer's collection. */
  exposeGc: boolean;
}

/** The collection `--expose-gc` exposes (its options as V8's `gc()` takes them). */
export type Collection = (options: object) => void;

/** Reads CHANNELD_V8_FLAGS: words separated by spaces. Anything else is an operator error (exit 78) naming the variable. */
export function parseV8Flags(value: string | undefined): V8Flags {
  const flags: V8Flags = { exposeGc: false };
  for (const word of (value ?? '').split(/\s+/).filter(Boolean)) {
    // V8 takes "-" and "_" alike in a flag's name.
    if (/^--expose[-_]gc$/.test(word)) {
      flags.exposeGc = true;
      continue;
    }
    const percent = /^--heap[-_]growing[-_]percent=(.*)$/.exec(word);
    if (!percent)
      throw new CodedError('V8_FLAGS_INVALID', `${V8_FLAGS_ENV}: "${word}" is not a flag channeld sets itself; other V8 flags go on node's command line`);
    if (!/^\d{1,3}$/.test(percent[1]!) || Number(percent[1]) > MAX_HEAP_GROWING_PERCENT)
      throw new CodedError('V8_FLAGS_INVALID', `${V8_FLAGS_ENV}: "${word}": the percent is a whole number from 0 to ${MAX_HEAP_GROWING_PERCENT}`);
    flags.heapGrowingPercent = Number(percent[1]);
  }
  return flags;
}

/** What the trimmer collects with: node's own `gc` (--expose-gc on its command line), else one made for it when `exposeGc`, else none. */
export function collection(flags: V8Flags, setFlags: (flags: string) => void = setFlagsFromString): Collection | undefined {
  const own = (globalThis as { gc?: Collection }).gc;
  if (own || !flags.exposeGc) return own;
  setFlags('--expose-gc');
  try {
    return runInNewContext('gc') as Collection;
  } finally {
    setFlags('--no-expose-gc');
  }
}

/** Sets what waits for the daemon to be ready, unless node's own command line set it. */
export function applyWhenReady(flags: V8Flags, execArgv: readonly string[] = process.execArgv, setFlags: (flags: string) => void = setFlagsFromString): void {
  if (flags.heapGrowingPercent === undefined) return;
  if (execArgv.some((a) => /^--heap[-_]growing[-_]percent(=|$)/.test(a))) return;
  setFlags(`--heap-growing-percent=${flags.heapGrowingPercent}`);
}
