import type { SlackMessage } from './server.js';

/** A task of a streamed message as the last task_update chunk for its id left it (Slack's TaskUpdateChunk). */
export interface SlackTask {
  id: string;
  title: string;
  status: 'pending' | 'in_progress' | 'complete' | 'error';
  details?: string;
  output?: string;
}

/** What the stream methods see of the fake. */
export interface StreamHost {
  messages: SlackMessage[];
  ts(): string;
  /** Every call carrying `chunks` gets this error: a workspace or API that does not take them. */
  refuseChunks: string | undefined;
}

type Answer = { ok: Record<string, unknown> } | { error: string };
type Chunk = { type: 'markdown_text'; text: string } | ({ type: 'task_update' } & SlackTask) | { type: 'plan_update' | 'blocks' };

const STATUSES = new Set(['pending', 'in_progress', 'complete', 'error']);
/** Slack's bound on a task's `details` and `output`. */
const TASK_TEXT_MAX = 256;

const optionalText = (v: unknown) => v === undefined || (typeof v === 'string' && v.length <= TASK_TEXT_MAX);

/** A chunk as the reference describes it (markdown_text with its text; task_update with id, title, a known status, short details/output). */
function chunkValid(c: Record<string, unknown>): boolean {
  switch (c.type) {
    case 'markdown_text':
      return typeof c.text === 'string' && c.text.length > 0;
    case 'task_update':
      return (
        typeof c.id === 'string' &&
        !!c.id &&
        typeof c.title === 'string' &&
        !!c.title &&
        STATUSES.has(c.status as string) &&
        optionalText(c.details) &&
        optionalText(c.output)
      );
    case 'plan_update':
      return typeof c.title === 'string';
    case 'blocks':
      return Array.isArray(c.blocks);
    default:
      return false;
  }
}

/** The call's `chunks` (form-encoded as JSON, as the SDK sends them): undefined when it has none, else the chunks or the error Slack answers. */
function readChunks(host: StreamHost, args: Record<string, string>): Chunk[] | { error: string } | undefined {
  if (args.chunks === undefined) return undefined;
  if (host.refuseChunks) return { error: host.refuseChunks };
  // The reference: either markdown_text or chunks.
  if (args.markdown_text !== undefined) return { error: 'invalid_arguments' };
  let chunks: unknown;
  try {
    chunks = JSON.parse(args.chunks);
  } catch {
    return { error: 'invalid_arguments' };
  }
  if (!Array.isArray(chunks) || chunks.length === 0 || !chunks.every((c) => c && typeof c === 'object' && chunkValid(c))) return { error: 'invalid_arguments' };
  return chunks as Chunk[];
}

/** Text chunks append to the message; a task_update creates its task or updates the one with its id in place. */
function apply(msg: SlackMessage, chunks: Chunk[] | undefined, markdown: string | undefined): void {
  for (const c of chunks ?? (markdown ? [{ type: 'markdown_text' as const, text: markdown }] : [])) {
    if (c.type === 'markdown_text') {
      msg.stream!.chunks.push(c.text);
      msg.text += c.text;
    } else if (c.type === 'task_update') {
      const { type: _, ...task } = c;
      const tasks = (msg.tasks ??= []);
      const i = tasks.findIndex((t) => t.id === task.id);
      if (i < 0) tasks.push(task);
      else tasks[i] = task;
    }
  }
}

/** chat.startStream / appendStream / stopStream, with `markdown_text` or `chunks`. */
export function streamMethod(host: StreamHost, method: string, args: Record<string, string>): Answer {
  const chunks = readChunks(host, args);
  if (chunks && 'error' in chunks) return chunks;
  if (method === 'chat.startStream') {
    if (!args.thread_ts) return { error: 'invalid_arguments' };
    // Slack's reference: the recipient user and team are required when streaming to channels (not DMs).
    if (!args.channel?.startsWith('D')) {
      if (!args.recipient_user_id) return { error: 'missing_recipient_user_id' };
      if (!args.recipient_team_id) return { error: 'missing_recipient_team_id' };
    }
    const msg: SlackMessage = {
      channel: args.channel!,
      ts: host.ts(),
      threadTs: args.thread_ts,
      text: '',
      deleted: false,
      edits: 0,
      stream: { chunks: [], stopped: false },
    };
    apply(msg, chunks, args.markdown_text);
    host.messages.push(msg);
    return { ok: { channel: msg.channel, ts: msg.ts } };
  }
  const msg = host.messages.find((m) => m.channel === args.channel && m.ts === args.ts && !m.deleted);
  if (!msg?.stream || msg.stream.stopped) return { error: 'message_not_in_streaming_state' };
  apply(msg, chunks, args.markdown_text);
  if (method === 'chat.stopStream') msg.stream.stopped = true;
  return { ok: { channel: msg.channel, ts: msg.ts } };
}
