import { z } from 'zod';
import { defineAction } from '../action.js';
import { CHANNEL_HEADER, channelRow, table } from '../table.js';

const channel = z.looseObject({
  id: z.string(),
  kind: z.string(),
  state: z.string(),
  since: z.string(),
  attempts: z.number(),
  connection: z.number(),
  last_error: z.looseObject({ code: z.string(), message: z.string() }).nullable(),
});

export const channelsAction = defineAction({
  name: 'channels',
  description: 'every channel with its state and last error',
  input: z.object({}),
  output: z.array(channel),
  readOnly: true,
  handler: (_i, { api }) => api.status().channels as never,
  format: (list) => (list.length ? table([CHANNEL_HEADER, ...list.map(channelRow)]) : 'no channels'),
});
