import type { AgentMode } from '../../contracts/modes.js';
import { briefMode } from './brief.js';
import { incognitoMode } from './incognito.js';

/**
 * The modes every workspace has. `[agent] modes` turns them on by default; `/mode NAME`
 * switches one per conversation. A new built-in mode is a file here and a line below.
 */
export const builtinModes: readonly AgentMode[] = [briefMode, incognitoMode];
