import { z } from 'zod';
import { defineAction } from '../action.js';

export const reloadAction = defineAction({
  name: 'reload',
  description: 're-read the config and apply the per-channel diff',
  input: z.object({}),
  output: z.looseObject({ ok: z.boolean(), generation: z.number(), errors: z.array(z.string()) }),
  readOnly: false,
  httpAliases: ['/reload'],
  handler: (_i, { api }) => api.reload(),
  format: (r) => (r.ok ? `reloaded: generation ${r.generation}` : `refused, the running config stays:\n${r.errors.join('\n')}`),
});
