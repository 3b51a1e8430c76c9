import { CodedError } from '../contracts/errors.js';
import { readCapped } from '../util/read-capped.js';

/** Characters of one transcript kept; more is not a voice note. */
export const MAX_TRANSCRIPT_CHARS = 20_000;
/** Bytes of the endpoint's answer read; a JSON `{ "text": ... }` of MAX_TRANSCRIPT_CHARS fits easily. */
const MAX_ANSWER_BYTES = 256 * 1024;

export interface TranscribeOptions {
  /** The agent's `base_url` (the `/audio/transcriptions` path is appended, as OpenAI's clients do). */
  baseUrl: string;
  apiKey?: string;
  model: string;
  audio: Buffer;
  /** The file name sent in the form; the server guesses the format from its extension. */
  fileName: string;
  mime?: string;
  signal: AbortSignal;
}

/**
 * Speech to text through an OpenAI-compatible `POST {base_url}/audio/transcriptions`: a
 * multipart form with `file` and `model`, answered by `{ "text": "..." }` (OpenAI's documented
 * `response_format = "json"`). Any failure is TRANSCRIPTION_FAILED with the reason; the
 * caller's signal bounds the time.
 */
export async function transcribe(o: TranscribeOptions): Promise<string> {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(o.audio)], { type: o.mime ?? 'application/octet-stream' }), o.fileName);
  form.append('model', o.model);
  form.append('response_format', 'json');
  const url = `${o.baseUrl.replace(/\/+$/, '')}/audio/transcriptions`;
  let res: Response;
  try {
    res = await fetch(url, { method: 'POST', body: form, signal: o.signal, headers: o.apiKey ? { authorization: `Bearer ${o.apiKey}` } : {} });
  } catch (err) {
    if (o.signal.aborted) throw o.signal.reason ?? err;
    throw new CodedError('TRANSCRIPTION_FAILED', `${url}: ${(err as Error).message}`, { cause: err });
  }
  const body = (
    await readCapped(res, MAX_ANSWER_BYTES, () => new CodedError('TRANSCRIPTION_FAILED', `the transcription answer passed ${MAX_ANSWER_BYTES} bytes`))
  ).toString('utf8');
  if (!res.ok) throw new CodedError('TRANSCRIPTION_FAILED', `${url}: HTTP ${res.status} ${body.slice(0, 200)}`);
  let text: unknown;
  try {
    text = (JSON.parse(body) as { text?: unknown }).text;
  } catch {
    throw new CodedError('TRANSCRIPTION_FAILED', `${url}: the answer is not JSON`);
  }
  if (typeof text !== 'string') throw new CodedError('TRANSCRIPTION_FAILED', `${url}: the answer has no "text"`);
  return text.trim().slice(0, MAX_TRANSCRIPT_CHARS);
}
