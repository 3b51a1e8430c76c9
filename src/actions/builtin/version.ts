import { z } from 'zod';
import { VERSION } from '../../util/version.js';
import { defineAction } from '../action.js';

export const versionAction = defineAction({
  name: 'version',
  description: 'the running daemon version',
  input: z.object({}),
  output: z.object({ version: z.string(), node: z.string() }),
  readOnly: true,
  slash: { help: 'the channeld version' },
  handler: () => ({ version: VERSION, node: process.version }),
  format: (v) => `channeld ${v.version} (node ${v.node})`,
});
