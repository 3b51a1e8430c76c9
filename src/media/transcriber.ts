import type { AgentConfig } from '../config/schema.js';
import { CodedError } from '../contracts/errors.js';
import type { Attachment } from '../contracts/message.js';
import { transcribe } from './transcribe.js';

/** Turns a downloaded voice note into text; the signal is the turn's. */
export type Transcriber = (audio: Buffer, attachment: Attachment, signal: AbortSignal) => Promise<string>;

const EXTENSION_OF: Record<string, string> = {
  'audio/ogg': 'ogg',
  'audio/opus': 'ogg',
  'audio/mpeg': 'mp3',
  'audio/mp3': 'mp3',
  'audio/mp4': 'm4a',
  'audio/m4a': 'm4a',
  'audio/x-m4a': 'm4a',
  'audio/aac': 'm4a',
  'audio/wav': 'wav',
  'audio/x-wav': 'wav',
  'audio/webm': 'webm',
  'audio/flac': 'flac',
};

/**
 * The agent's speech-to-text, or undefined when it has no `transcription_model` (or no
 * `base_url` to send it to). A transcription may take the agent's `request_timeout_ms`.
 */
export function transcriberFor(agent: AgentConfig, apiKey: string | undefined): Transcriber | undefined {
  const model = agent.transcription_model;
  const baseUrl = agent.base_url;
  if (model === undefined || baseUrl === undefined || agent.provider === 'echo') return undefined;
  const timeoutMs = agent.request_timeout_ms;
  return (audio, a, signal) => {
    const mime = a.mime?.split(';')[0]?.trim().toLowerCase();
    // OpenAI tells the format by the file name; a platform's voice note often has none (most record OGG/Opus).
    const fileName = a.name ?? `voice.${(mime && EXTENSION_OF[mime]) ?? 'ogg'}`;
    const timeout = AbortSignal.timeout(timeoutMs);
    return transcribe({
      baseUrl,
      ...(apiKey ? { apiKey } : {}),
      model,
      audio,
      fileName,
      ...(mime ? { mime } : {}),
      signal: AbortSignal.any([signal, timeout]),
    }).catch((err: unknown) => {
      if (timeout.aborted && !signal.aborted) throw new CodedError('TRANSCRIPTION_FAILED', `no transcript within ${timeoutMs} ms`, { cause: err });
      throw err;
    });
  };
}
