import type { AnyChunk, TaskUpdateChunk, WebClient } from '@slack/web-api';
import type { Logger } from 'pino';
import type { ToolProgress } from '../../src/contracts/channel.js';
import { ChannelError } from '../../src/contracts/errors.js';
import { chunksRefusal } from './errors.js';
import { slackStreamText } from './mentions.js';

/** The most characters Slack takes in a task's `details` (TaskUpdateChunk). */
export const TASK_DETAILS_MAX_CHARS = 256;

const STATUS = { running: 'in_progress', done: 'complete', failed: 'error' } as const;

/**
 * The channels whose Slack refused stream chunks, by the adapter's own client (one per
 * channel, kept as long as the channel is): their streams leave tool progress to the text.
 */
const refusedBy = new WeakSet<WebClient>();

/** What a stream call resolves to when Slack refused its chunks: nothing of it was taken. */
export const CHUNKS_REFUSED = Symbol('chunks refused');

/** Whether this channel's Slack refused stream chunks before. */
export const chunksRefused = (web: WebClient): boolean => refusedBy.has(web);

/** `text` in at most `max` characters: cut with an ellipsis, never inside a surrogate pair or an escaped `<` (`&lt;`). */
export function cutText(text: string, max = TASK_DETAILS_MAX_CHARS): string {
  if (text.length <= max) return text;
  return `${text
    .slice(0, max - 1)
    .replace(/[\uD800-\uDBFF]$/, '')
    .replace(/&(l|lt)?$/, '')}…`;
}

/** Each tool call as a task Slack shows in the message (its id the call's, so a later state updates it in place); escaped as streamed text is. */
export function taskChunks(progress: readonly ToolProgress[] | undefined): TaskUpdateChunk[] {
  return (progress ?? []).map((p) => ({
    type: 'task_update',
    id: p.id,
    title: slackStreamText(p.name, true),
    status: STATUS[p.state],
    ...(p.note ? { details: cutText(slackStreamText(p.note, true)) } : {}),
  }));
}

/**
 * The most tasks a stream remembers as in progress: a reply's tool calls, which one message
 * shows; a reply that somehow runs more at once leaves those past it to Slack's expiry rather
 * than growing without bound.
 */
export const OPEN_TASKS_MAX = 100;

/** Notes what Slack took of `tasks` in `open` (the tasks in progress on the message, by id; at most OPEN_TASKS_MAX). */
export function remember(open: Map<string, TaskUpdateChunk>, tasks: readonly TaskUpdateChunk[]): void {
  for (const t of tasks)
    if (t.status !== 'in_progress') open.delete(t.id);
    else if (open.has(t.id) || open.size < OPEN_TASKS_MAX) open.set(t.id, t);
}

/**
 * The tasks a stop carries: `tasks`, and every task `open` still shows in progress, each still
 * in progress closed as `status`: once the stream stops nothing can update them, and Slack would
 * show them running for ever.
 */
export function closing(open: ReadonlyMap<string, TaskUpdateChunk>, tasks: readonly TaskUpdateChunk[], status: 'complete' | 'error'): TaskUpdateChunk[] {
  const ids = new Set(tasks.map((t) => t.id));
  return [...tasks, ...[...open.values()].filter((t) => !ids.has(t.id))].map((t) => (t.status === 'in_progress' ? { ...t, status } : t));
}

/** One stream call's chunks: the new text, when there is any, then the tasks. */
export const withText = (markdown: string, tasks: readonly TaskUpdateChunk[]): AnyChunk[] => [
  ...(markdown ? [{ type: 'markdown_text' as const, text: markdown }] : []),
  ...tasks,
];

/**
 * A stream call that carries chunks: where Slack refuses them (chunksRefusal) it resolves to
 * CHUNKS_REFUSED, nothing appended, and the channel remembers it (logged once); Slack answered,
 * so it is no failure of the stream itself.
 */
export function unlessChunksRefused<T>(web: WebClient, log: Logger, chat: string, call: Promise<T>): Promise<T | typeof CHUNKS_REFUSED> {
  return call.catch((err: unknown) => {
    const code = chunksRefusal(err);
    if (code === undefined) throw err;
    if (!refusedBy.has(web)) log.info({ chat, error: code }, 'Slack refused task_update chunks on a stream; tool progress goes in the text from now on');
    refusedBy.add(web);
    return CHUNKS_REFUSED;
  });
}

/** The rejection that sends the reply back to the progress line in the text (NativeStream.showsToolProgress). */
export const progressRefused = (why: string): ChannelError => new ChannelError('CHANNEL_PROGRESS_REFUSED', `Slack stream: ${why}`);
