import { extname } from 'node:path';
import type { ImageInput } from '../contracts/agent-runner.js';
import type { AgentConfig, ModelConfig } from '../config/schema.js';
import type { Attachment } from '../contracts/message.js';
import { CodedError, errorMessage } from '../contracts/errors.js';
import { isSpeech, SESSION_USER_TEXT, TRANSCRIPT_MARKER } from '../runtime/builtin-hooks.js';
import { USER_SPOKE } from '../runtime/runtime.js';
import type { Runtime } from '../runtime/runtime.js';
import { raceAbort } from '../util/abortable.js';
import type { Transcriber } from '../media/transcriber.js';

/** Characters of text files one turn may add to the user's message, all files together. */
export const ATTACHMENT_TEXT_BUDGET_CHARS = 40_000;
/**
 * Files one turn reads (downloads, transcribes, shows): a platform's own limit is 10 to 20
 * per message, but a self-hosted server or a collected turn can list any number, and each
 * read file is held in memory until the model call. The rest are named, not read.
 */
export const MAX_ATTACHMENTS_READ = 10;

export interface AttachmentDeps {
  agent: () => AgentConfig;
  models: () => Record<string, ModelConfig>;
  maxBytes: () => number;
  /** How long one download may take in all. */
  timeoutMs: () => number;
  /** Told about downloads that failed for a reason other than size. */
  onError?: (attachment: Attachment, err: unknown) => void;
  /** Speech to text with the agent's `transcription_model`; undefined when it has none. */
  transcriber?: () => Transcriber | undefined;
}

/** Conversations remembered as already told that voice is not understood (oldest forgotten first). */
const TOLD_NO_VOICE_MAX = 10_000;

const TEXT_MIMES = /^(text\/|application\/(json|xml|x-yaml|yaml|toml|javascript|x-javascript|typescript|x-sh|x-python|sql|csv|x-ndjson|ld\+json))/;
const TEXT_EXTENSIONS = new Set(
  '.txt .md .markdown .csv .tsv .json .jsonl .ndjson .yaml .yml .toml .ini .cfg .conf .xml .html .htm .css .log .sql .sh .bash .zsh .py .js .mjs .cjs .ts .tsx .jsx .go .rs .java .kt .c .h .cc .cpp .hpp .cs .rb .php .swift .scala .lua .pl .r .diff .patch .tex .rst .env'.split(
    ' ',
  ),
);
const IMAGE_MIMES = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp']);

export type AttachmentKind = 'image' | 'text' | 'audio' | 'other';

/** What an attachment is for the model: an image part, text, or a description. */
export function kindOf(a: Attachment): AttachmentKind {
  if (a.type === 'photo') return 'image';
  if (isSpeech(a)) return 'audio';
  if (a.mime && IMAGE_MIMES.has(a.mime.toLowerCase())) return 'image';
  if (a.mime && TEXT_MIMES.test(a.mime.toLowerCase())) return 'text';
  if (a.name && TEXT_EXTENSIONS.has(extname(a.name).toLowerCase())) return 'text';
  return 'other';
}

function sizeText(bytes: number | undefined): string {
  if (bytes === undefined) return 'size unknown';
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

function nameOf(a: Attachment): string {
  return a.name ?? (a.type === 'photo' ? 'photo' : `${a.type} file`);
}

/** How the model hears of a file it does not get: name, type and size. */
export function describe(a: Attachment, why?: string): string {
  return `[attachment: ${nameOf(a)} (${a.mime ?? a.type}, ${sizeText(a.size)})${why ? `; ${why}` : ''}]`;
}

/** Text only when it decodes as UTF-8 without control bytes that mark a binary file. */
function asText(buf: Buffer): string | undefined {
  const text = new TextDecoder('utf-8', { fatal: false }).decode(buf);
  if (text.includes('\u0000') || (text.match(/\uFFFD/g)?.length ?? 0) > text.length / 100 + 2) return undefined;
  return text;
}

/**
 * Attachments into the model's input, after the input is built (post_agent_build): images
 * become image parts for models whose `[models."NAME"] input` includes "image"; text files
 * are appended to the message within ATTACHMENT_TEXT_BUDGET_CHARS; anything else is
 * described by name, type and size. What the user should know (an image the model cannot
 * see, a file too large to read) is a one-line note at the top of the answer.
 */
export function registerAttachments(runtime: Runtime, deps: AttachmentDeps): void {
  const toldNoVoice = new Set<string>();
  runtime.hooks.register({
    phase: 'post_agent_build',
    name: 'attachments',
    // Synchronous for a message without attachments (most): an async hook makes the rest of its phase wait.
    run: (ctx) => {
      const input = ctx.input;
      const attachments = ctx.message.attachments;
      if (!input || !attachments.length) return;
      return (async () => {
        const model = input.model ?? deps.agent().model ?? deps.agent().provider;
        const seesImages = (deps.models()[model]?.input ?? ['text']).includes('image');
        const maxBytes = deps.maxBytes();
        const download = ctx.request.download;
        const parts: string[] = [];
        const images: ImageInput[] = [];
        const notes: string[] = [];
        const heard = new Map<Attachment, string>();
        let textLeft = ATTACHMENT_TEXT_BUDGET_CHARS;
        let read = 0;
        for (const a of attachments) {
          const kind = kindOf(a);
          if (kind === 'other') {
            parts.push(describe(a));
            continue;
          }
          const transcriber = kind === 'audio' ? deps.transcriber?.() : undefined;
          if (kind === 'audio' && !transcriber) {
            parts.push(describe(a, 'not heard: no transcription model'));
            // Told once per conversation: a chat full of voice notes is not answered by the same notice each time.
            if (!toldNoVoice.has(ctx.scope)) {
              toldNoVoice.add(ctx.scope);
              if (toldNoVoice.size > TOLD_NO_VOICE_MAX) toldNoVoice.delete(toldNoVoice.values().next().value!);
              notes.push('Voice messages are not understood here, so I could not hear yours; please write instead.');
            }
            continue;
          }
          const maxDurationMs = deps.agent().max_audio_duration_ms;
          if (kind === 'audio' && a.durationMs !== undefined && a.durationMs > maxDurationMs) {
            parts.push(describe(a, 'too long to transcribe'));
            notes.push(
              `${nameOf(a)} is ${Math.round(a.durationMs / 1000)} s long, more than the ${Math.round(maxDurationMs / 1000)} s limit, so it was not transcribed.`,
            );
            continue;
          }
          if (kind === 'image' && !seesImages) {
            parts.push(describe(a, 'not shown: this model reads text only'));
            notes.push(`${model} reads text only, so it did not see ${nameOf(a)}.`);
            continue;
          }
          if (a.size !== undefined && a.size > maxBytes) {
            parts.push(describe(a, 'too large to read'));
            notes.push(`${nameOf(a)} (${sizeText(a.size)}) is larger than the ${sizeText(maxBytes)} limit, so it was not read.`);
            continue;
          }
          if (!download || (kind === 'text' && textLeft <= 0)) {
            parts.push(describe(a));
            continue;
          }
          // Counted as it is fetched: a file that is only named costs nothing.
          if (++read > MAX_ATTACHMENTS_READ) {
            parts.push(describe(a, `not read: only the first ${MAX_ATTACHMENTS_READ} files of a message are`));
            if (read === MAX_ATTACHMENTS_READ + 1) notes.push(`Only the first ${MAX_ATTACHMENTS_READ} files were read; send the others in another message.`);
            continue;
          }
          let bytes: Buffer;
          const timeoutMs = deps.timeoutMs();
          const timedOut = new AbortController();
          const timer = setTimeout(() => timedOut.abort(new CodedError('ATTACHMENT_TIMEOUT', `${nameOf(a)} did not arrive within ${timeoutMs} ms`)), timeoutMs);
          try {
            // An adapter that ignores the signal must not hold the turn either: the race ends the wait.
            bytes = await raceAbort(download(a, { maxBytes, signal: AbortSignal.any([ctx.signal, timedOut.signal]) }), timedOut.signal);
          } catch (err) {
            if (ctx.signal.aborted) throw err;
            const why = timedOut.signal.aborted ? (timedOut.signal.reason as CodedError) : err;
            const code = why instanceof CodedError ? why.code : undefined;
            if (code !== 'ATTACHMENT_TOO_LARGE') deps.onError?.(a, why);
            parts.push(
              describe(
                a,
                code === 'ATTACHMENT_TOO_LARGE'
                  ? 'too large to read'
                  : code === 'ATTACHMENT_TIMEOUT'
                    ? 'not read: the download timed out'
                    : 'could not be downloaded',
              ),
            );
            notes.push(
              code === 'ATTACHMENT_TOO_LARGE'
                ? `${nameOf(a)} is larger than the ${sizeText(maxBytes)} limit, so it was not read.`
                : code === 'ATTACHMENT_TIMEOUT'
                  ? `${nameOf(a)} was not read: the download stalled or took longer than ${timeoutMs} ms.`
                  : `${nameOf(a)} could not be downloaded (${errorMessage(why)}).`,
            );
            continue;
          } finally {
            clearTimeout(timer);
          }
          if (transcriber) {
            let transcript: string;
            try {
              transcript = await transcriber(bytes, a, ctx.signal);
            } catch (err) {
              if (ctx.signal.aborted) throw err;
              deps.onError?.(a, err);
              parts.push(describe(a, 'could not be transcribed'));
              notes.push(`${nameOf(a)} could not be transcribed (${errorMessage(err)}).`);
              continue;
            }
            const marked = `${TRANSCRIPT_MARKER} ${transcript || '(nothing audible)'}`;
            heard.set(a, marked);
            ctx.extras.set(USER_SPOKE, true);
            parts.push(marked);
            if (deps.agent().show_transcript) notes.push(`🎙️ “${transcript}”`);
            continue;
          }
          if (kind === 'image') {
            images.push({ data: bytes, mediaType: a.mime && IMAGE_MIMES.has(a.mime) ? a.mime : 'image/jpeg', name: nameOf(a) });
            parts.push(`[image: ${nameOf(a)}]`);
            continue;
          }
          const text = asText(bytes);
          if (text === undefined) {
            parts.push(describe(a, 'not text'));
            continue;
          }
          const kept = text.slice(0, textLeft);
          textLeft -= kept.length;
          parts.push(`<file name="${nameOf(a)}">\n${kept}${kept.length < text.length ? `\n[cut: ${text.length - kept.length} more characters]` : ''}\n</file>`);
        }
        const caption = input.text.trim();
        // The session keeps the caption and what was attached, not the files' contents.
        // A voice note's words are what the user said, so the session keeps its transcript.
        ctx.extras.set(SESSION_USER_TEXT, [caption, ...attachments.map((a) => heard.get(a) ?? describe(a))].filter(Boolean).join('\n'));
        input.text = [caption || (images.length ? 'The user sent this without a caption.' : ''), ...parts].filter(Boolean).join('\n\n');
        if (images.length) input.images = images;
        for (const note of notes) ctx.emit({ type: 'text_delta', text: note.startsWith('🎙️') ? `${note}\n\n` : `ℹ️ ${note}\n\n` });
      })();
    },
  });
}
