import { z } from 'zod';
import { defineAction } from '../action.js';

const channel = z.looseObject({ id: z.string(), kind: z.string(), state: z.string(), since: z.string(), attempts: z.number(), connection: z.number(), last_error: z.looseObject({ code: z.string(), message: z.string() }).nullable() });

export const channelsAction = defineAction({
  name: 'channels',
  description: 'every channel with its state and last error',
  input: z.object({}),
  output: z.array(channel),
  readOnly: true,
  handler: (_i, { api }) => api.status().channels as never,
  format: (list) => list.map((c) => `${c.id.padEnd(12)} ${c.kind.padEnd(8)} ${c.state.padEnd(10)} since ${c.since}${c.last_error ? `  ${c.last_error.code}: ${c.last_error.message}` : ''}`).join('\n') || 'no channels',
});
