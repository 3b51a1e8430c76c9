import type { BotActivity } from './server.js';

/** Teams' answer to a request on a stream its user stopped (Microsoft's "Stream bot messages" page). */
export const STREAM_CANCELLED_BY_USER = 'Content stream was cancelled by user.';
/** Teams' answer (403 ContentStreamNotAllowed) to a streamed text that does not contain the one streamed before it (the same page). */
export const STREAM_NOT_CONTINUED = 'Request streamed content should contain the previously streamed content';
/** The fake's answer (400 BadRequest) to an informative update once the response streams: Teams documents none. */
export const INFORMATIVE_AFTER_STREAMING = 'Informative updates are not allowed once the response streams';
/** "Informative messages must not be more than 1 kb or 1000 characters" (the same page); both are checked. */
export const INFORMATIVE_MAX_CHARS = 1000;
export const INFORMATIVE_MAX_BYTES = 1024;

/** A stream update Teams took: a typing activity with streaminfo, `streaming` text or `informative` (not the final). */
export interface StreamUpdate {
  conversationId: string;
  streamId: string;
  text: string;
  sequence: number;
  streamType: 'streaming' | 'informative';
}

/** A Connector answer: status and JSON body. */
type Answer = [status: number, body: unknown];

const refused = (message: string): Answer => [403, { error: { code: 'ContentStreamNotAllowed', message } }];
const badRequest = (message: string): Answer => [400, { error: { code: 'BadRequest', message } }];

/**
 * Teams' streaming protocol in a 1:1 chat, as its "Stream bot messages" page documents it: the
 * first request posts the message (its id is the stream id), informative updates only before
 * the response streams and within their size, every streamed text and the final containing the
 * text streamed before it (checked as a prefix: the strict reading of "contain"), no request
 * after the final or past the time limit, and what the user's Stop leaves.
 */
export class FakeStreams {
  readonly #starts = new Map<string, number>();
  /** What each stream streamed last (its `streaming` text). */
  readonly #streamed = new Map<string, string>();

  constructor(private readonly o: { activities: BotActivity[]; updates: StreamUpdate[]; limitMs: () => number; newId: () => string }) {}

  /** A POSTed activity with a streaminfo entity, in a conversation where streaming is allowed. */
  take(conversationId: string, body: any): Answer {
    const info = body.entities.find((e: { type: string }) => e.type === 'streaminfo');
    const streamType: string = info.streamType ?? 'streaming';
    const text: string = typeof body.text === 'string' ? body.text : '';
    if (streamType === 'informative' && (text.length > INFORMATIVE_MAX_CHARS || Buffer.byteLength(text) > INFORMATIVE_MAX_BYTES))
      return refused('Message size too large');
    if (streamType !== 'final' && !text.trim()) return badRequest('Start streaming activities should include text');
    const update = (streamId: string) =>
      this.o.updates.push({ conversationId, streamId, text, sequence: info.streamSequence, streamType: streamType as StreamUpdate['streamType'] });
    if (!info.streamId) {
      if (streamType === 'final') return badRequest('a final message names the streamId');
      const streamId = this.o.newId();
      const streaming = streamType === 'streaming';
      this.#starts.set(streamId, Date.now());
      this.#streamed.set(streamId, streaming ? text : '');
      this.o.activities.push({
        conversationId,
        id: streamId,
        text: streaming ? text : '',
        ...(streaming ? {} : { informative: text }),
        updates: 0,
        deleted: false,
        streamed: true,
        streaming: true,
      });
      update(streamId);
      return [201, { id: streamId }];
    }
    const a = this.o.activities.find((x) => x.conversationId === conversationId && x.id === info.streamId);
    if (!a) return [400, { error: { code: 'BadArgument', message: 'no such stream' } }];
    if (a.stoppedByUser) return refused(STREAM_CANCELLED_BY_USER);
    if (!a.streaming) return refused('Content stream is not allowed on an already completed streamed message');
    if (Date.now() - this.#starts.get(a.id)! > this.o.limitMs()) {
      a.streaming = false;
      return refused('Content stream finished due to exceeded streaming time.');
    }
    const streamed = this.#streamed.get(a.id) ?? '';
    if (streamType === 'informative') {
      // "Start with informative updates ... and later switch to response streaming"; Teams' SDKs
      // send none after the first text. Its answer to one after it is not documented: refused here.
      if (streamed) return badRequest(INFORMATIVE_AFTER_STREAMING);
      a.informative = text;
      update(a.id);
      return [202, {}];
    }
    if (!text.startsWith(streamed)) return refused(STREAM_NOT_CONTINUED);
    a.text = text;
    a.informative = undefined;
    if (streamType === 'final') {
      a.streaming = false;
      if (body.attachments) a.attachments = body.attachments;
      return [201, { id: a.id }];
    }
    this.#streamed.set(a.id, text);
    update(a.id);
    return [201, { id: a.id }];
  }
}
