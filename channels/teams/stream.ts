import type { Logger } from 'pino';
import type { NativeStream, TransportOptions } from '../../src/contracts/channel.js';
import { ChannelError, errorMessage } from '../../src/contracts/errors.js';
import type { MessageRef, ReplyTarget } from '../../src/contracts/message.js';
import { settleWithin, sleep } from '../../src/util/abortable.js';
import { neutraliseMentions } from './cards.js';
import { ConnectorError } from './connector.js';
import { cutInformative, InformativeProgress } from './progress.js';
import { stoppedByUser, type StoppedAnswers } from './stop.js';

/**
 * How long the end of a stream its reply released may take (the request it left in flight
 * settling, then its final, a 429 waited out within it): no reply waits for it but an update
 * of that message (TeamsAdapter.edit).
 */
export const RELEASED_FINAL_TIMEOUT_MS = 5_000;

/** A released stream's key in `abandoned`: its conversation and its message (the stream id). */
export const releasedKey = (ref: MessageRef): string => `${ref.chatId}\n${ref.messageId}`;

/** What a Teams stream needs from the adapter. */
export interface TeamsStreamDeps {
  channel: string;
  log: Logger;
  /**
   * POSTs an activity to the conversation (a Connector call, its failure classified). `sent`
   * gets the request as it went out: one `signal` cut may still land, and settles on its own bound.
   */
  post(chatId: string, body: Record<string, unknown>, signal: AbortSignal, sent: (request: Promise<unknown>) => void): Promise<{ id?: string }>;
  /** A message activity's body: markdown, the buttons' card, mentions written as text. */
  message(text: string, buttons: TransportOptions['buttons']): Record<string, unknown>;
  send(target: ReplyTarget, text: string, options: TransportOptions): Promise<MessageRef>;
  edit(ref: MessageRef, text: string, options: TransportOptions): Promise<void>;
  stops: StoppedAnswers;
  /** The ends of released streams by `releasedKey`, each until it is over (never rejects): the adapter's close and its updates of that message wait for them. */
  abandoned: Map<string, Promise<void>>;
}

/** Teams says the stream is over without the bot's final (completed, or past its two minutes): no final can go any more. */
function endedByTeams(err: unknown): boolean {
  const e = connectorError(err);
  return e !== undefined && e.status === 403 && /already completed|exceeded streaming time/i.test(e.message);
}

/** Teams' answer to a failed request; undefined when it gave none (cut, timed out, the network): the request may still have landed. */
function connectorError(err: unknown): ConnectorError | undefined {
  const e = err instanceof ChannelError ? err.cause : err;
  return e instanceof ConnectorError ? e : undefined;
}

/**
 * Teams' streaming protocol (1:1 chats; Microsoft's "Stream bot messages"): typing activities
 * with a `streaminfo` entity (the first answer's id is the stream id, `streamSequence` counts
 * every request up from 1), then one `message` with `streamType: "final"`. Each streamed text
 * must contain the one before it (else 403 ContentStreamNotAllowed "Request streamed content
 * should contain the previously streamed content"), so nothing that does not continue what
 * Teams has is ever streamed: such a text waits for the final, and a final that does not
 * continue it ends the stream with what it streamed and updates the message to the text.
 * Where Teams refuses the stream (403 "Content stream is not allowed"), the error reaches the
 * reply, which goes on with send + update. The stream id is the streamed message's activity id
 * (`ref`, once the first request is answered): the reply stores it, so a stream past Teams'
 * two-minute limit, or a turn run again after a crash, updates that message in place.
 *
 * The reply's running tools (`showsToolProgress`) never enter the text: until the answer's
 * text starts they show as `informative` updates (Teams' progress text, at most 1000
 * characters or 1 KB, cut with an ellipsis); once text streams Teams shows no more of them
 * (its SDKs send none after the first text), so the tools show nothing and the text goes on.
 * A step with new text and a tool change is one request, the text: the text replaces any
 * informative update, and none may follow it.
 *
 * A stream the reply released without its final (a failure it fell back from, a final not
 * delivered, a hard stop) is ended here, once, with what it streamed (Teams' page asks for the
 * final; without it the message shows streaming until Teams' two-minute limit). The request
 * left in flight (`last`) settles first: a final of the reply's that lands all the same ends
 * the stream with the whole answer, and nothing more goes. An update of the message waits for
 * this end (TeamsAdapter.edit), so a final landing late cannot undo it. One that streamed no
 * text yet is left to that limit: a final carries text.
 *
 * The user's Stop button: Teams answers the next request "cancelled by user" and allows no
 * change after it, so the stream ends where it was (nothing more is sent for it) and, while
 * its turn runs, REPLY_STOPPED_BY_USER tells the reply to stop the turn.
 */
export function openTeamsStream(d: TeamsStreamDeps, target: ReplyTarget): NativeStream {
  const { chatId } = target;
  let streamId: string | undefined;
  let sequence = 0;
  let stopped = false;
  /** Teams has the final, or said the stream is over: nothing more streams, no final goes. */
  let ended = false;
  let released = false;
  /** The text Teams has as streamed content (mentions written as text): every later one starts with it. */
  let streamed = '';
  /** A streamed text whose request went unanswered (cut, timed out): Teams may have it, so a released stream's final carries it (it contains `streamed`). */
  let unsure: string | undefined;
  /** The informative text Teams shows. */
  let informative = '';
  const tools = new InformativeProgress();
  /** The last request sent, as it went out: cut by the reply's signal, it may still land (a final: the stream ended). */
  let last: Promise<unknown> = Promise.resolve();
  const post = (body: Record<string, unknown>, signal: AbortSignal, isFinal: boolean) =>
    d.post(chatId, body, signal, (request) => {
      last = request.then(
        () => {
          if (isFinal) ended = true;
        },
        (err: unknown) => {
          if (endedByTeams(err)) ended = true;
        },
      );
    });
  const ref = (): MessageRef => ({ chatId, messageId: streamId! });
  /** Whether `err` is the user's Stop: the stream is over, nothing more is sent for this answer. */
  const userStopped = (err: unknown): boolean => {
    if (streamId === undefined || !stoppedByUser(err)) return false;
    stopped = true;
    d.stops.stopped(target, ref());
    d.log.info({ channel: d.channel, conversation: chatId, stream: streamId }, 'Teams: the user pressed Stop; the answer ends where it was');
    return true;
  };
  const stopTheTurn = () => new ChannelError('REPLY_STOPPED_BY_USER', 'Teams: the user pressed Stop on the streamed answer');
  const final = (text: string, buttons: TransportOptions['buttons'], signal: AbortSignal) =>
    post({ ...d.message(text, buttons), entities: [{ type: 'streaminfo', streamId, streamType: 'final' }] }, signal, true);
  /** One streaming or informative request; `text` already has its mentions written as text. */
  const streamRequest = async (streamType: 'streaming' | 'informative', text: string, signal: AbortSignal) => {
    const entity = { type: 'streaminfo', streamType, streamSequence: ++sequence, ...(streamId ? { streamId } : {}) };
    try {
      const sent = await post({ type: 'typing', text, entities: [entity] }, signal, false);
      streamId ??= sent.id;
    } catch (err) {
      if (userStopped(err)) throw stopTheTurn();
      if (endedByTeams(err)) ended = true;
      else if (streamType === 'streaming' && connectorError(err) === undefined) unsure = text;
      throw err;
    }
    if (streamType === 'streaming') [streamed, unsure] = [text, undefined];
    else informative = text;
  };
  /** Ends a stream no reply drives any more, in the background, under its own bound; logged, never thrown. */
  const endReleased = () => {
    const ending = (async () => {
      const signal = AbortSignal.timeout(RELEASED_FINAL_TIMEOUT_MS);
      // What the reply left in flight lands (or fails) first: sent now, the final would race it.
      await settleWithin(last, Infinity, signal);
      // The reply's own final landed (Teams has the whole answer), or Teams ended the stream.
      if (ended) return;
      const text = unsure ?? streamed;
      for (;;) {
        try {
          await final(text, undefined, signal);
          ended = true;
          return;
        } catch (err) {
          const retryAfterMs = err instanceof ChannelError ? err.retryAfterMs : undefined;
          if (retryAfterMs === undefined || signal.aborted) {
            d.log.warn(
              { channel: d.channel, conversation: chatId, stream: streamId, err: errorMessage(err) },
              'a Teams stream its reply gave up on could not be ended; Teams ends it at its two-minute limit',
            );
            return;
          }
          await sleep(retryAfterMs, signal);
        }
      }
    })();
    const key = releasedKey(ref());
    d.abandoned.set(key, ending);
    void ending.then(() => d.abandoned.delete(key));
  };
  return {
    get ref() {
      return streamId === undefined ? undefined : ref();
    },
    showsToolProgress: true,
    update: async (raw, o) => {
      if (stopped) throw stopTheTurn();
      tools.take(o.progress);
      const text = neutraliseMentions(raw);
      if (text.trim() !== '' && text !== streamed) {
        if (text.startsWith(streamed)) return streamRequest('streaming', text, o.signal);
        // Teams would refuse it (403): the final carries it.
        d.log.debug({ channel: d.channel, conversation: chatId }, 'Teams stream: the text does not continue what was streamed; it waits for the final');
        return;
      }
      // Informative updates only before the text: Teams shows none after it.
      if (streamed !== '') return;
      const line = tools.line();
      const shown = line === undefined ? '' : cutInformative(neutraliseMentions(line));
      if (shown !== '' && shown !== informative) await streamRequest('informative', shown, o.signal);
    },
    finish: async (raw, o) => {
      if (stopped) return ref();
      if (!streamId) return d.send(target, raw, o);
      if (ended) {
        // Its final went (this is a retry of the update after it), or Teams ended it: no final can go, the message is updated.
        await d.edit(ref(), raw, o);
        return ref();
      }
      const continues = neutraliseMentions(raw).startsWith(streamed);
      try {
        // A final must contain what was streamed too: one that does not ends the stream with it, then the message is updated.
        const sent = await final(continues ? raw : streamed, continues ? o.buttons : undefined, o.signal);
        ended = true;
        if (!continues) await d.edit(ref(), raw, o);
        return { chatId, messageId: sent.id ?? streamId };
      } catch (err) {
        if (endedByTeams(err)) ended = true;
        if (!userStopped(err)) throw err;
        // The turn's last write: it ended, nothing to stop. Otherwise the answer outgrew one message mid-turn.
        if (o.final !== true) throw stopTheTurn();
        return ref();
      }
    },
    release: () => {
      if (released || ended || stopped || streamId === undefined) return;
      released = true;
      // A text cut mid-request may still land: `unsure` is checked again once it settled.
      if ((unsure ?? streamed).trim() !== '') endReleased();
      else
        d.log.debug(
          { channel: d.channel, conversation: chatId, stream: streamId },
          'Teams stream released with no text streamed; Teams ends it at its two-minute limit',
        );
    },
  };
}
