import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

/** Key paths whose values are always censored, whatever the value looks like. */
const redactPaths = [
  'token', '*.token', 'authorization', '*.authorization', '*.headers.authorization', 'headers.authorization',
  'secret', '*.secret', 'apiKey', '*.apiKey', 'api_key', '*.api_key', 'password', '*.password',
  'botToken', '*.botToken', 'appToken', '*.appToken', 'signingSecret', '*.signingSecret',
];

/**
 * Token shapes of the chat platforms channeld ships with, scrubbed from any log line that
 * carries one (a second net under the configured values: an SDK may log a token it built).
 */
const tokenPatterns = [
  /(?<!\d)\d{6,12}:[A-Za-z0-9_-]{30,}/g, // "<bot id>:<secret>" bot tokens, also inside ".../bot<token>/getMe\"
  /\bxox[abposr]-[A-Za-z0-9-]{10,}\b/g, // "xox?-" bot/user tokens
  /\bxapp-[A-Za-z0-9-]{10,}\b/g, // "xapp-" app-level tokens
  /\b[MN][A-Za-z\d_-]{23,25}\.[A-Za-z\d_-]{6}\.[A-Za-z\d_-]{27,}\b/g, // three-part "<id>.<time>.<hmac>" bot tokens
  /\bBearer\s+[A-Za-z0-9._~+/=-]{8,}/g,
];

export interface LoggerOptions {
  level: string;
  /** Where lines go; stdout by default. */
  destination?: DestinationStream;
  /** Pretty-print for a human (see prettyDestination); JSON lines otherwise. */
  pretty?: boolean;
  /** Secret values to scrub wherever they appear; read on every line so reloads update it. */
  secrets?: () => readonly string[];
}

/** Replaces known secret values and token-shaped strings with [redacted]. */
export function scrub(line: string, secrets: readonly string[]): string {
  let out = line;
  for (const s of secrets) if (s.length >= 6) out = out.split(s).join('[redacted]');
  for (const re of tokenPatterns) out = out.replace(re, '[redacted]');
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

/** pino JSON to stdout (journald reads it), pretty in a TTY, with tokens redacted twice over. */
export function createLogger(options: LoggerOptions): Logger {
  const secrets = options.secrets ?? (() => []);
  const destination = options.destination ?? pino.destination({ dest: 1, sync: true });
  return pino(
    {
      level: options.level,
      base: { pid: process.pid },
      redact: { paths: redactPaths, censor: '[redacted]' },
      hooks: { streamWrite: (line) => scrub(line, secrets()) },
      serializers: { err: pino.stdSerializers.err },
    },
    destination,
  );
}
