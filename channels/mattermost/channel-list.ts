import { TokenParser, Tokenizer, TokenType } from '@streamparser/json';
import type { ParsedTokenInfo } from '@streamparser/json';
import { ChannelError } from '../../src/contracts/errors.js';
import { platformAgent } from '../../src/util/http-json.js';
import { MattermostAnswerTooDeep, MattermostAnswerTooLarge, MattermostApiError } from './errors.js';
import { waitOf } from './rest.js';

/** A channel of the bot's as the catch-up reads it: the list's objects less everything else. */
export interface MmListedChannel {
  id: string;
  type: string;
  name?: string;
  team_id?: string;
  last_post_at?: number;
}

/**
 * The most of one channel list read. The server does not page it (`GET /users/me/channels`
 * and the per-team list answer every channel at once), and a bot anyone can DM is in one
 * channel per person who did: about 500–700 bytes each, so 15,000 DMs are over the 8 MiB of
 * an ordinary answer. The list is read as it streams, one channel at a time, so this bounds
 * the traffic and time a server that never ends its answer costs, not memory: 128 MiB is some
 * 200,000 channels.
 */
export const MAX_LIST_BYTES = 128 * 1024 * 1024;
/**
 * The most of one channel in the list. Mattermost caps what a channel carries (a header of
 * 1,024 characters, a purpose of 250, a display name of 64) and a real one is a few KiB at most
 * with its props; the parser holds a string whole until it ends, so this bounds that memory.
 */
export const MAX_CHANNEL_BYTES = 1024 * 1024;
/**
 * The deepest nesting read, the list's own brackets counted: a channel is 2, its `props` 3, and
 * the deepest the server puts there, `channel_mentions` (FillInChannelsProps), holds an object
 * per channel named: 5. Plugins may store more in `props`, so the bound leaves room (27 levels
 * more); what it stops is `[[[[…`, which the parser holds at some 100 bytes a level.
 */
export const MAX_LIST_DEPTH = 32;
/** The most of a refusal's body read, for its AppError. */
const MAX_REFUSAL_BYTES = 64 * 1024;
/** The AppError of a list with no channel in it: the store finds no row, and says so rather than answer "[]". */
const NOT_FOUND = 'app.channel.get_channels.not_found.app_error';

export interface ChannelListBounds {
  maxListBytes?: number;
  maxChannelBytes?: number;
}

/** Tokens that are a value whole: an element of the array that is one ends at the next `,`. */
const PRIMITIVES = new Set([TokenType.STRING, TokenType.NUMBER, TokenType.TRUE, TokenType.FALSE, TokenType.NULL]);

/**
 * The server's AppError (`id`, `message`, `status_code`; no channel has a `status_code` or lacks
 * a `type`), where `GET /users/me/channels` writes it: after the "[" and channels it had sent
 * when a page failed, as it had answered 200 already.
 */
function appError(value: unknown): MattermostApiError | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as Record<string, unknown>;
  if (typeof v.status_code !== 'number' || typeof v.id !== 'string' || 'type' in v) return undefined;
  return new MattermostApiError(v.status_code, v.id, typeof v.message === 'string' ? v.message : `HTTP ${v.status_code}`, undefined, true);
}

/** The object's fields the catch-up uses, when they are what Mattermost sends; undefined when it is no channel. */
function listed(value: unknown): MmListedChannel | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as Record<string, unknown>;
  if (typeof v.id !== 'string' || typeof v.type !== 'string') return undefined;
  return {
    id: v.id,
    type: v.type,
    ...(typeof v.name === 'string' ? { name: v.name } : {}),
    ...(typeof v.team_id === 'string' ? { team_id: v.team_id } : {}),
    ...(typeof v.last_post_at === 'number' ? { last_post_at: v.last_post_at } : {}),
  };
}

/**
 * A JSON array of channels, parsed as its bytes come (@streamparser/json): each element is
 * handed to `keep` once complete and dropped (`keepStack: false`). The nesting is followed
 * token by token so that no element (the bytes between two of the array's own `[`, `,`, `]`
 * and element ends) grows past `maxChannelBytes`, nor deeper than MAX_LIST_DEPTH. The server's
 * AppError in the list rejects with it: as an element (the first page failed), or straight
 * after a channel, without a comma (a later page failed). Its not-found as the first element
 * is a list without channels.
 */
class ChannelListParser {
  readonly #tokens = new Tokenizer();
  #values = new TokenParser({ paths: ['$.*'], keepStack: false });
  #depth = 0;
  #started = false;
  /** The array's last own token ended an element: an object next, with no comma, is no element. */
  #afterElement = false;
  /** The list's first element was the server's not-found: it has no channels. */
  #empty = false;
  /** Where the array's last own token (`[`, `,`, an element's end) was: the current element began after it. */
  #elementFrom = 0;
  #fed = 0;

  constructor(
    keep: (channel: MmListedChannel) => void,
    private readonly maxChannelBytes: number,
    private readonly status: number,
  ) {
    this.#values.onValue = ({ value, key }) => {
      if (this.#empty) throw new Error("the list went on after the server's not-found");
      const failed = appError(value);
      if (failed?.errorId === NOT_FOUND && key === 0) this.#empty = true;
      else if (failed) throw failed;
      const channel = listed(value);
      if (channel) keep(channel);
    };
    this.#tokens.onToken = (t) => this.#token(t);
  }

  #token(t: ParsedTokenInfo): void {
    // An AppError object, or anything but a list, must not read as a list without channels.
    if (!this.#started && t.token !== TokenType.LEFT_BRACKET) throw new Error('the answer is not a list');
    this.#started = true;
    if (this.#depth === 1 && t.token === TokenType.LEFT_BRACE && this.#afterElement) this.#values = this.#appended();
    if (t.token === TokenType.LEFT_BRACE || t.token === TokenType.LEFT_BRACKET) this.#depth++;
    else if (t.token === TokenType.RIGHT_BRACE || t.token === TokenType.RIGHT_BRACKET) this.#depth--;
    if (this.#depth > MAX_LIST_DEPTH) throw new MattermostAnswerTooDeep(this.status, MAX_LIST_DEPTH, 'a channel in the list');
    if (this.#depth > 1) this.#check(t.offset);
    this.#values.write(t);
    if (this.#depth === 1) this.#afterElement = t.token !== TokenType.LEFT_BRACKET && t.token !== TokenType.COMMA;
    if (this.#depth <= 1 && !PRIMITIVES.has(t.token)) this.#elementFrom = t.offset;
  }

  /** A parser for the object the server wrote after a channel: its AppError, else no list. */
  #appended(): TokenParser {
    const parser = new TokenParser({ paths: ['$'], keepStack: false });
    parser.onValue = ({ value }) => {
      throw appError(value) ?? new Error('an object follows a channel without a comma');
    };
    return parser;
  }

  #check(at: number): void {
    if (at - this.#elementFrom > this.maxChannelBytes) throw new MattermostAnswerTooLarge(this.status, this.maxChannelBytes, 'a channel in the list');
  }

  write(chunk: Uint8Array): void {
    this.#tokens.write(chunk);
    this.#fed += chunk.byteLength;
    // A string is one token, emitted only at its end: checked as its bytes come.
    this.#check(this.#fed);
  }

  end(): void {
    this.#tokens.end();
    // The server's not-found is all it writes after the "[": no "]" follows.
    if (!this.#values.isEnded && !this.#empty) throw new Error('the answer ended before the list did');
  }
}

/**
 * `GET /api/v4/{path}`, a list of channels, read as it streams within `MAX_LIST_BYTES`, each
 * channel handed to `keep`. A refusal, or the AppError `GET /users/me/channels` ends its list
 * with when it fails half-way (`inList`), rejects with MattermostApiError (errors.ts sorts it); a list
 * over a bound with MattermostAnswerTooLarge or MattermostAnswerTooDeep; one cut off or not
 * JSON with CHANNEL_UNAVAILABLE, retried. No channel (the server's not-found) is an empty list.
 * Resolves with the server's time (its answer's Date header), when it says.
 */
export async function readChannelList(
  o: { url: string; token: string },
  path: string,
  keep: (channel: MmListedChannel) => void,
  signal: AbortSignal,
  bounds: ChannelListBounds = {},
): Promise<number | undefined> {
  const maxListBytes = bounds.maxListBytes ?? MAX_LIST_BYTES;
  const target = new URL(`${o.url}/api/v4/${path}`);
  // undici's request (no redirect is followed: the token never travels to another host), for its body as a stream.
  const {
    statusCode: status,
    headers,
    body,
  } = await platformAgent().request({
    origin: target.origin,
    path: `${target.pathname}${target.search}`,
    method: 'GET',
    headers: { authorization: `Bearer ${o.token}`, 'x-requested-with': 'XMLHttpRequest' },
    signal,
  });
  try {
    const header = (name: string) => {
      const v = headers[name];
      return Array.isArray(v) ? v.join(', ') : v;
    };
    const date = Date.parse(header('date') ?? '');
    const serverTimeMs = Number.isFinite(date) ? date : undefined;
    if (status < 200 || status >= 300) {
      // Decoded once whole: a character split between two chunks stays one character.
      const chunks: Buffer[] = [];
      let bytes = 0;
      for await (const chunk of body as AsyncIterable<Buffer>) {
        chunks.push(chunk);
        bytes += chunk.byteLength;
        if (bytes > MAX_REFUSAL_BYTES) break;
      }
      const text = Buffer.concat(chunks).subarray(0, MAX_REFUSAL_BYTES).toString('utf8');
      let e: { id?: string; message?: string } = {};
      try {
        e = (JSON.parse(text) ?? {}) as typeof e;
      } catch {}
      // A team's list answers its not-found as a 404 when the bot is in none of its channels.
      if (status === 404 && e.id === NOT_FOUND) return serverTimeMs;
      throw new MattermostApiError(status, e.id, e.message ?? (text.slice(0, 200) || `HTTP ${status}`), waitOf({ header }));
    }
    if (Number(header('content-length') ?? 0) > maxListBytes) throw new MattermostAnswerTooLarge(status, maxListBytes);
    const list = new ChannelListParser(keep, bounds.maxChannelBytes ?? MAX_CHANNEL_BYTES, status);
    let read = 0;
    // What the parser refuses (not JSON, not a list, cut off); a network failure goes on as it is.
    const parse = (step: () => void) => {
      try {
        step();
      } catch (err) {
        if (err instanceof MattermostApiError) throw err;
        const why = err instanceof Error ? err.message : String(err);
        throw new ChannelError('CHANNEL_UNAVAILABLE', `Mattermost channel list: not a JSON list after ${read} bytes (${why})`, { cause: err });
      }
    };
    for await (const chunk of body as AsyncIterable<Buffer>) {
      read += chunk.byteLength;
      if (read > maxListBytes) throw new MattermostAnswerTooLarge(status, maxListBytes);
      parse(() => list.write(chunk));
    }
    parse(() => list.end());
    return serverTimeMs;
  } finally {
    // Unread (a refusal, a bound, a parse failure): the request is cut rather than read to its end.
    body.destroy();
  }
}
