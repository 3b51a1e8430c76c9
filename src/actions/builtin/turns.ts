import { z } from 'zod';
import { defineAction } from '../action.js';

const task = z.object({ id: z.string(), state: z.enum(['queued', 'running']), agent: z.string(), channel: z.string(), scope: z.string(), model: z.string().optional(), queuedAt: z.string(), startedAt: z.string().nullable() });

/** Operators see every turn; a chat user sees those of their own conversation. */
export const turnsAction = defineAction({
  name: 'turns',
  description: 'running and queued turns',
  input: z.object({}),
  output: z.array(task),
  readOnly: true,
  slash: { help: 'the answers running or waiting in this conversation' },
  handler: (_i, { api, caller }) => api.turns().filter((t) => caller.face !== 'slash' || t.scope === caller.scope),
  format: (list) => list.map((t) => `${t.id.padEnd(6)} ${t.state.padEnd(8)} ${t.agent}  ${t.scope}  ${t.model ?? '-'}  ${t.startedAt ?? `queued ${t.queuedAt}`}`).join('\n') || 'no turns',
});
