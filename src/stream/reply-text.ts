import type { TurnEnding } from '../contracts/agent-events.js';
import type { ChannelCapabilities } from '../contracts/channel.js';
import { chunkText } from '../util/chunk.js';

/** What a reply stopped by the user (or a shutdown) ends with. */
export const STOP_MARKER = '⏹ Stopped.';

/** `text` in the platform's messages: its own split when it has one, else chunks at its limit. */
function split(caps: ChannelCapabilities, text: string): string[] {
  return caps.split ? caps.split(text) : chunkText(text, caps.maxMessageLength);
}

/** The reply's last text for how the turn ended: the answer, with the stop marker or the error's readable note. */
function finalText(text: string, ending: TurnEnding): string {
  if (ending.type === 'cancelled') return text.trim() ? `${text.trimEnd()}\n\n${STOP_MARKER}` : STOP_MARKER;
  if (ending.type === 'error') return `${text.trimEnd()}${text.trim() ? '\n\n' : ''}⚠️ ${ending.message}`;
  return text.trim() ? text : '';
}

/** What the reply's messages show once the turn ended. */
export function finalChunks(caps: ChannelCapabilities, text: string, ending: TurnEnding): string[] {
  const last = finalText(text, ending);
  return last ? split(caps, last) : [];
}

/**
 * What the reply's messages show while the answer grows: the text so far plus the progress
 * line (a running tool) on the last message when it fits. Without edits, only chunks that will
 * not change any more are sent early.
 */
export function draftChunks(caps: ChannelCapabilities, text: string, progress: string | undefined): string[] {
  const chunks = text ? split(caps, text) : [];
  if (progress) {
    const last = chunks.length ? chunks.pop()! : '';
    const withProgress = last ? `${last}\n\n${progress}` : progress;
    chunks.push(withProgress.length <= caps.maxMessageLength ? withProgress : last);
  }
  if (!caps.editsDrafts) chunks.pop();
  return chunks.filter((c) => c.trim() !== '');
}

/** What the text gets when a tool call went on in the background: the user is told its result will follow. */
export function backgroundNote(text: string, tool: string): string {
  return `${text.trim() ? '\n\n' : ''}⏳ ${tool} is running in the background; its result will follow.\n\n`;
}
