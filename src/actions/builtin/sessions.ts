import { z } from 'zod';
import { defineAction } from '../action.js';

export const sessionsAction = defineAction({
  name: 'sessions',
  description: 'sessions per channel: conversations, sessions and last activity',
  input: z.object({}),
  output: z.array(z.object({ channel: z.string(), agent: z.string(), conversations: z.number(), sessions: z.number(), last_activity: z.string().nullable() })),
  readOnly: true,
  handler: (_i, { api }) => api.sessions(),
  format: (list) => list.map((s) => `${s.channel.padEnd(12)} agent ${s.agent}: ${s.conversations} conversation(s), ${s.sessions} session(s), last ${s.last_activity ?? 'never'}`).join('\n') || 'no channels',
});
