import type { AgentConfig } from '../config/schema.js';
import { CodedError } from '../contracts/errors.js';
import { cutText } from '../util/cut-text.js';
import { readCapped } from '../util/read-capped.js';

/** Characters of an answer spoken: OpenAI's `/audio/speech` takes at most 4096; a longer answer is cut (its text is sent whole). */
export const MAX_SPOKEN_CHARS = 4096;

/** One spoken answer, ready to send as a voice note or a file. */
export interface SpokenAnswer {
  bytes: Buffer;
  mime: string;
  name: string;
}

/** Turns an answer into audio; the signal is the turn's (the daemon's hard stop after it ended). */
export type Speaker = (text: string, signal: AbortSignal) => Promise<SpokenAnswer>;

/** What the server's Content-Type says, as a file: Opus in OGG (what chat apps play as a voice note) unless it says otherwise. */
function fileOf(contentType: string | null): { mime: string; name: string } {
  const mime = contentType?.split(';')[0]?.trim().toLowerCase() || 'audio/ogg';
  if (mime === 'audio/mpeg' || mime === 'audio/mp3') return { mime: 'audio/mpeg', name: 'answer.mp3' };
  if (mime === 'audio/wav' || mime === 'audio/x-wav') return { mime: 'audio/wav', name: 'answer.wav' };
  if (mime === 'audio/aac') return { mime, name: 'answer.aac' };
  if (mime === 'audio/flac') return { mime, name: 'answer.flac' };
  // "audio/opus", "audio/ogg", or a server that says nothing useful: OGG/Opus was asked for.
  return { mime: 'audio/ogg', name: 'answer.ogg' };
}

/** The audio, refused before the transfer when its declared size is too large and as soon as it passes otherwise. */
async function readAudio(res: Response, maxBytes: number, url: string): Promise<Buffer> {
  const declared = Number(res.headers.get('content-length') ?? Number.NaN);
  if (declared > maxBytes) throw new CodedError('SPEECH_FAILED', `${url}: the audio (${declared} bytes) is larger than ${maxBytes} bytes`);
  return readCapped(res, maxBytes, () => new CodedError('SPEECH_FAILED', `${url}: the audio passed ${maxBytes} bytes`));
}

/**
 * Text to speech through an OpenAI-compatible `POST {base_url}/audio/speech` (JSON `model`,
 * `input`, `voice`, `response_format: "opus"`), answered by the audio bytes. Bounded by
 * `maxBytes` and the caller's signal; any failure is SPEECH_FAILED with the reason.
 */
export async function speak(o: {
  baseUrl: string;
  apiKey?: string;
  model: string;
  voice: string;
  text: string;
  maxBytes: number;
  signal: AbortSignal;
}): Promise<SpokenAnswer> {
  const url = `${o.baseUrl.replace(/\/+$/, '')}/audio/speech`;
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(o.apiKey ? { authorization: `Bearer ${o.apiKey}` } : {}) },
      body: JSON.stringify({ model: o.model, input: cutText(o.text, MAX_SPOKEN_CHARS), voice: o.voice, response_format: 'opus' }),
      signal: o.signal,
    });
  } catch (err) {
    if (o.signal.aborted) throw o.signal.reason ?? err;
    throw new CodedError('SPEECH_FAILED', `${url}: ${(err as Error).message}`, { cause: err });
  }
  if (!res.ok) {
    const body = await readAudio(res, 4096, url).catch(() => Buffer.alloc(0));
    throw new CodedError('SPEECH_FAILED', `${url}: HTTP ${res.status} ${body.toString('utf8').slice(0, 200)}`);
  }
  const bytes = await readAudio(res, o.maxBytes, url);
  if (!bytes.length) throw new CodedError('SPEECH_FAILED', `${url}: the answer has no audio`);
  return { bytes, ...fileOf(res.headers.get('content-type')) };
}

/**
 * The agent's text-to-speech, or undefined when it has no `speech_model` (or no `base_url`).
 * One answer may take the agent's `request_timeout_ms` and `maxBytes` of audio.
 */
export function speakerFor(agent: AgentConfig, apiKey: string | undefined, maxBytes: () => number): Speaker | undefined {
  const model = agent.speech_model;
  const baseUrl = agent.base_url;
  if (model === undefined || baseUrl === undefined || agent.provider === 'echo') return undefined;
  const timeoutMs = agent.request_timeout_ms;
  return (text, signal) => {
    const timeout = AbortSignal.timeout(timeoutMs);
    return speak({
      baseUrl,
      ...(apiKey ? { apiKey } : {}),
      model,
      voice: agent.speech_voice,
      text,
      maxBytes: maxBytes(),
      signal: AbortSignal.any([signal, timeout]),
    }).catch((err: unknown) => {
      if (timeout.aborted && !signal.aborted) throw new CodedError('SPEECH_FAILED', `no audio within ${timeoutMs} ms`, { cause: err });
      throw err;
    });
  };
}
