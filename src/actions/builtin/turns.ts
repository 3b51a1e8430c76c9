import { z } from 'zod';
import { defineAction } from '../action.js';
import { table } from '../table.js';

const task = z.object({
  id: z.string(),
  state: z.enum(['queued', 'running']),
  agent: z.string(),
  channel: z.string(),
  scope: z.string(),
  model: z.string().optional(),
  queued_at: z.string(),
  started_at: z.string().nullable(),
});

/** Operators see every turn; a chat user sees those of their own conversation. */
export const turnsAction = defineAction({
  name: 'turns',
  description: 'running and queued turns',
  input: z.object({}),
  output: z.array(task),
  readOnly: true,
  slash: { help: 'the answers running or waiting in this conversation' },
  // In chat, the conversation's running turn is the one asking: it lists only what waits behind it.
  handler: (_i, { api, caller }) => api.turns().filter((t) => caller.face !== 'slash' || (t.scope === caller.scope && t.state !== 'running')),
  format: (list) =>
    list.length
      ? table([
          ['ID', 'STATE', 'AGENT', 'CHANNEL', 'CONVERSATION', 'MODEL', 'STARTED'],
          ...list.map((t) => [t.id, t.state, t.agent, t.channel, t.scope, t.model ?? '-', t.started_at ?? `queued ${t.queued_at}`]),
        ])
      : 'no turns',
});
