import { z } from 'zod';
import { CodedError } from '../../contracts/errors.js';
import { defineAction } from '../action.js';

/** sysexits.h EX_CONFIG: the new build did not take over, the running daemon carries on. */
const EX_CONFIG = 78;

export const upgradeAction = defineAction({
  name: 'upgrade',
  description: 'start the new build and hand over to it without closing the port (exec: an absolute path to run instead)',
  input: z.object({ exec: z.string().min(1).max(4096).optional() }),
  output: z.looseObject({ ok: z.boolean(), pid: z.number().optional(), error: z.string().optional(), took_ms: z.number() }),
  readOnly: false,
  handler: ({ exec }, { api }) => {
    if (!api.upgrade) throw new CodedError('MANAGEMENT_UNBOUND', 'this daemon does not serve upgrades');
    return api.upgrade(exec ? { exec } : {});
  },
  exitStatus: (r) => (r.ok ? 0 : EX_CONFIG),
  format: (r) =>
    r.ok
      ? `upgraded: pid ${r.pid} took over in ${r.took_ms} ms; the old process finishes its running turns and exits`
      : `upgrade failed, the running daemon carries on: ${r.error ?? 'no reason given'}`,
});
