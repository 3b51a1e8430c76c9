import type { Action } from '../action.js';
import { channelsAction } from './channels.js';
import { chartsAction } from './charts.js';
import { reloadAction } from './reload.js';
import { sessionsAction } from './sessions.js';
import { statusAction } from './status.js';
import { stopTurnAction } from './stop-turn.js';
import { turnsAction } from './turns.js';
import { upgradeAction } from './upgrade.js';
import { usageAction } from './usage.js';
import { versionAction } from './version.js';

/** The actions every daemon has. */
export const builtinActions: Action[] = [
  statusAction,
  channelsAction,
  reloadAction,
  turnsAction,
  stopTurnAction,
  sessionsAction,
  usageAction,
  chartsAction,
  upgradeAction,
  versionAction,
] as Action[];
