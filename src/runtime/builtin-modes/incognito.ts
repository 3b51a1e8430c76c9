import type { AgentMode } from '../../contracts/modes.js';
import { SESSION_SKIP } from '../builtin-hooks.js';

/**
 * Off the record: while on, the model sees none of the session's earlier turns and the
 * conversation's turns are not stored in it. Turning it off resumes the session as it was.
 */
export const incognitoMode: AgentMode = {
  name: 'incognito',
  description: 'off the record: no history is read and nothing is remembered',
  setup(api) {
    api.hook({
      phase: 'pre_agent_build',
      name: 'incognito',
      after: ['session_load'],
      run: (ctx) => {
        ctx.history = [];
        ctx.extras.set(SESSION_SKIP, true);
      },
    });
  },
};
