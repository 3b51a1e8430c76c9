import type { Logger } from 'pino';
import type { NativeStream, TransportOptions } from '../../src/contracts/channel.js';
import { ChannelError, errorMessage } from '../../src/contracts/errors.js';
import type { MessageRef, ReplyTarget } from '../../src/contracts/message.js';
import { settleWithin, sleep } from '../../src/util/abortable.js';
import { DEFAULT_REQUEST_TIMEOUT_MS } from '../../src/util/platform-call.js';
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
   * POSTs an activity to the conversation (a Connector call, its failure classified). The
   * request itself runs under `requestSignal`, so one that `signal` cut may still land; `sent`
   * gets it as it went out.
   */
  post(
    chatId: string,
    body: Record<string, unknown>,
    signal: AbortSignal,
    requestSignal: AbortSignal,
    sent: (request: Promise<{ id?: string }>) => void,
  ): Promise<{ id?: string }>;
  /** A message activity's body: markdown, the buttons' card, mentions written as text. */
  message(text: string, buttons: TransportOptions['buttons']): Record<string, unknown>;
  send(target: ReplyTarget, text: string, options: TransportOptions): Promise<MessageRef>;
  edit(ref: MessageRef, text: string, options: TransportOptions): Promise<void>;
  stops: StoppedAnswers;
  /**
   * The ends of released streams by `releasedKey` (by a symbol of their own until Teams names the
   * message), each until it is over (never rejects): the adapter's close and its updates of that message wait for them.
   */
  abandoned: Map<string | symbol, Promise<void>>;
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
  /** Requests sent and not settled: a stream released before Teams named it may still get its id from one. */
  let pending = 0;
  /**
   * A reply's request runs under its own bound (DEFAULT_REQUEST_TIMEOUT_MS), not the reply's
   * signal, so a released stream's end can wait for it rather than race it; the released
   * stream's final runs under the release's bound (`requestSignal`), so none outlives it.
   */
  const post = (body: Record<string, unknown>, signal: AbortSignal, isFinal: boolean, requestSignal = AbortSignal.timeout(DEFAULT_REQUEST_TIMEOUT_MS)) =>
    d.post(chatId, body, signal, requestSignal, (request) => {
      pending++;
      last = request.then(
        (answer) => {
          pending--;
          if (isFinal) ended = true;
          // The first request's answer names the stream even where the reply gave up on it: a release ends that stream.
          else streamId ??= answer.id;
        },
        (err: unknown) => {
          pending--;
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
  const final = (text: string, buttons: TransportOptions['buttons'], signal: AbortSignal, requestSignal?: AbortSignal) =>
    post({ ...d.message(text, buttons), entities: [{ type: 'streaminfo', streamId, streamType: 'final' }] }, signal, true, requestSignal);
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
    // Assigned before its first await resumes: the body keys itself by its message once Teams named it.
    let ending = Promise.resolve();
    ending = (async () => {
      const signal = AbortSignal.timeout(RELEASED_FINAL_TIMEOUT_MS);
      // What the reply left in flight lands (or fails) first: sent now, the final would race it.
      await settleWithin(last, Infinity, signal);
      // The reply's own final landed (Teams has the whole answer), or Teams ended the stream;
      // or, released before Teams named it, its first request did not land: there is no stream.
      if (ended || streamId === undefined) return;
      const text = unsure ?? streamed;
      // Only an informative update landed: Teams' page leaves that to its two-minute limit (a final carries text).
      if (text.trim() === '') return;
      // Known now, the message's update (TeamsAdapter.edit) waits for this end.
      d.abandoned.set(releasedKey(ref()), ending);
      for (;;) {
        try {
          // Cut at the release's bound, on our side too: an update of the message waits no
          // longer for this end, so the final must not land after that update.
          await final(text, undefined, signal, signal);
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
    // By its message, which an update waits for; released before Teams named it, by a key of
    // its own until then (the reply has no id to update, but close waits for it).
    const unnamed = Symbol(chatId);
    d.abandoned.set(streamId === undefined ? unnamed : releasedKey(ref()), ending);
    void ending.then(() => {
      d.abandoned.delete(unnamed);
      if (streamId !== undefined) d.abandoned.delete(releasedKey(ref()));
    });
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
      // Not yet named by Teams, with no request out: nothing streams.
      if (released || ended || stopped || (streamId === undefined && pending === 0)) return;
      released = true;
      // A text cut mid-request may still land (and a first request name the stream): `unsure` is checked again once it settled.
      if (streamId === undefined || (unsure ?? streamed).trim() !== '') endReleased();
      else
        d.log.debug(
          { channel: d.channel, conversation: chatId, stream: streamId },
          'Teams stream released with no text streamed; Teams ends it at its two-minute limit',
        );
    },
  };
}
