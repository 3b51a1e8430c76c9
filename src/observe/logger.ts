import { fstatSync } from 'node:fs';
import { pino, type DestinationStream, type Logger } from 'pino';
import { stdoutDestination } from './line-destination.js';
import { traceIds } from './trace/ambient.js';

export type { Logger };

/** The mixin's answer outside a traced message: never merged into, never written. */
const UNTRACED = Object.freeze({});

/** Keys whose values are always censored, at any depth, whatever the value looks like. */
const secretKeys = ['token', 'authorization', 'secret', 'apiKey', 'api_key', 'password', 'botToken', 'appToken', 'signingSecret'];
const secretKeySet = new Set(secretKeys);
/**
 * A secret key with a scalar value in a JSON line. pino escapes every quote inside a string, so
 * `"token":` can only be a key, never text inside a message.
 */
const secretScalar = new RegExp(`"(${secretKeys.join('|')})":("(?:[^"\\\\]|\\\\.)*"|-?[0-9][0-9.eE+-]*|true|false|null)`, 'g');
/** A secret key whose value is an object or an array: rare, handled by re-parsing the line. */
const secretStructured = new RegExp(`"(?:${secretKeys.join('|')})":[[{]`);

/**
 * Token shapes of the chat platforms channeld ships with, scrubbed from any log line that
 * carries one (a second net under the configured values: an SDK may log a token it built).
 */
const tokenPatterns = [
  /(?<!\d)\d{6,12}:[A-Za-z0-9_-]{30,}/, // "<bot id>:<secret>" bot tokens, also inside ".../bot<token>/getMe\"
  /\bxox[abposr]-[A-Za-z0-9-]{10,}\b/, // "xox?-" bot/user tokens
  /\bxapp-[A-Za-z0-9-]{10,}\b/, // "xapp-" app-level tokens
  /\b[MN][A-Za-z\d_-]{23,25}\.[A-Za-z\d_-]{6}\.[A-Za-z\d_-]{27,}\b/, // three-part "<id>.<time>.<hmac>" bot tokens
  /\bBearer\s+[A-Za-z0-9._~+/=-]{8,}/,
];
/** All of them in one pass: a log line is scanned once, not once per pattern. */
const anyToken = new RegExp(tokenPatterns.map((r) => r.source).join('|'), 'g');

export interface LoggerOptions {
  level: string;
  /** Where lines go; stdout by default. */
  destination?: DestinationStream;
  /** Pretty-print for a human (see prettyDestination); JSON lines otherwise. */
  pretty?: boolean;
  /** Secret values to scrub wherever they appear; read on every line so reloads update it. */
  secrets?: () => readonly string[];
  /** Prefix each line with its syslog priority (`<3>` for error …): journald reads it (see underJournald). */
  journald?: boolean;
}

/**
 * Whether stdout is a journald stream: systemd sets JOURNAL_STREAM to its "device:inode".
 * journald then takes a `<N>` prefix as the line's priority, so `journalctl -p err` finds errors.
 */
export function underJournald(env: NodeJS.ProcessEnv = process.env, fd = 1): boolean {
  const [dev, ino] = (env.JOURNAL_STREAM ?? '').split(':');
  if (!dev || !ino) return false;
  try {
    const st = fstatSync(fd);
    return String(st.dev) === dev && String(st.ino) === ino;
  } catch {
    return false;
  }
}

/** pino's level number as a syslog priority: fatal crit, error err, warn warning, info info, debug and trace debug. */
function priorityOf(line: string): number {
  const level = Number(/^\{"level":(\d+)/.exec(line)?.[1] ?? 30);
  return level >= 60 ? 2 : level >= 50 ? 3 : level >= 40 ? 4 : level >= 30 ? 6 : 7;
}

/** Replaces known secret values and token-shaped strings with [redacted]. */
export function scrub(line: string, secrets: readonly string[]): string {
  let out = line;
  for (const s of secrets) if (s.length >= 6 && out.includes(s)) out = out.split(s).join('[redacted]');
  return out.replace(anyToken, '[redacted]');
}

/**
 * Censors the value of every secret key (`token`, `authorization`, …) at any depth of a JSON
 * log line. Done on the serialized line rather than with pino's `redact` paths: one regex pass
 * per line instead of a walk per path, and no depth limit (`*.token` stopped at one level).
 */
export function censorKeys(line: string): string {
  let out = line.replace(secretScalar, '"$1":"[redacted]"');
  if (secretStructured.test(out)) {
    try {
      out = `${JSON.stringify(JSON.parse(out), (k, v: unknown) => (secretKeySet.has(k) ? '[redacted]' : v))}\n`;
    } catch {
      // Not one JSON object (a pretty line): the scalar pass and the token scrub still apply.
    }
  }
  return out;
}

/**
 * A pretty destination for a terminal. pino-pretty is loaded only here: under systemd the
 * daemon writes JSON and never pays for it.
 */
export async function prettyDestination(): Promise<DestinationStream> {
  const { default: pretty } = await import('pino-pretty');
  return pretty({ colorize: true, sync: true });
}

/** pino JSON to stdout (journald reads it, with priorities when `journald`), pretty in a TTY, with tokens redacted twice over. */
export function createLogger(options: LoggerOptions): Logger {
  const secrets = options.secrets ?? (() => []);
  // The lines of one turn of the event loop go out in one synchronous write at its end: on
  // stdout at once, no write per line, no thread-pool round trip (see line-destination.ts). A
  // stdout that stops reading never blocks the daemon: lines wait in memory, up to 16 MiB,
  // and past that are dropped whole; pino flushes them synchronously on exit (waiting up to
  // 1 s for a stalled reader), so only a kill -9 can lose lines, those of the last turn.
  const destination = options.destination ?? stdoutDestination();
  return pino(
    {
      level: options.level,
      base: { pid: process.pid },
      hooks: {
        streamWrite: options.journald ? (line) => `<${priorityOf(line)}>${scrub(censorKeys(line), secrets())}` : (line) => scrub(censorKeys(line), secrets()),
      },
      serializers: { err: pino.stdSerializers.err },
      // Inside a traced message (`[observe] otlp_endpoint`) a line carries its trace_id and
      // span_id; otherwise the line is left as it is, without an object made for nothing.
      mixin: () => traceIds() ?? UNTRACED,
      mixinMergeStrategy: (line: object, ids: object) => (ids === UNTRACED ? line : Object.assign(ids, line)),
    },
    destination,
  );
}
