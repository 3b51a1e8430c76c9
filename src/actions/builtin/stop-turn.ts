import { z } from 'zod';
import { defineAction } from '../action.js';
import { CodedError } from '../../contracts/errors.js';

/** An operator action: stops any turn; chat users use /stop in their own conversation. */
export const stopTurnAction = defineAction({
  name: 'stop-turn',
  description: 'stop a running turn, or drop a queued one, by id',
  input: z.object({ id: z.string().min(1) }),
  output: z.object({ id: z.string(), result: z.enum(['cancelled', 'dropped']) }),
  readOnly: false,
  cli: { args: ['id'] },
  handler: async ({ id }, { api }) => {
    const result = await api.stopTurn(id);
    if (!result) throw new CodedError('ACTION_NOT_FOUND', `no running or queued turn has id ${id}`);
    return { id, result };
  },
  format: (r) => `turn ${r.id} ${r.result}`,
});
