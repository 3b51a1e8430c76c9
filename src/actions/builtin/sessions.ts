import { z } from 'zod';
import { defineAction } from '../action.js';
import { table } from '../table.js';

export const sessionsAction = defineAction({
  name: 'sessions',
  description: 'sessions per channel: conversations, sessions and last activity',
  input: z.object({}),
  output: z.array(z.object({ channel: z.string(), agent: z.string(), conversations: z.number(), sessions: z.number(), last_activity: z.string().nullable() })),
  readOnly: true,
  handler: (_i, { api }) => api.sessions(),
  format: (list) =>
    list.length
      ? table([
          ['CHANNEL', 'AGENT', 'CONVERSATIONS', 'SESSIONS', 'LAST ACTIVITY'],
          ...list.map((s) => [s.channel, s.agent, String(s.conversations), String(s.sessions), s.last_activity ?? 'never']),
        ])
      : 'no channels',
});
