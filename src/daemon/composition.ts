import type { LoggerOptions } from '../observe/logger.js';
import type { LiveConfig } from './config-service.js';
import {
  actionsPlugin,
  approvalsPlugin,
  channelTablePlugin,
  extensionsPlugin,
  httpPlugin,
  loggerPlugin,
  mcpPlugin,
  memoryTrimPlugin,
  metricsPlugin,
  rootPlugins,
  supervisorPlugin,
  toolCallsPlugin,
  trackerPlugin,
} from './core.js';
import { chartsPlugin } from './charts.js';
import { dispatcherPlugin } from './dispatch-wiring.js';
import { managementPlugin } from './management.js';
import { remindersPlugin } from './reminders.js';
import { schedulesPlugin } from './schedules.js';
import { definePlugin, type DaemonPlugin, type Services } from './services.js';
import { statusPlugin } from './status.js';
import { workspacesPlugin } from './workspaces.js';
import { tracingPlugin } from './tracing.js';

/**
 * The plugins every daemon runs, whatever its mode: the one list the daemon loads and the
 * composition test plans, so the test checks the graph that really runs.
 */
export function corePlugins(
  live: LiveConfig,
  options: { hardStop: AbortSignal; reloader: Services['reload']; logger?: Partial<LoggerOptions> },
): DaemonPlugin[] {
  const { reloader } = options;
  return [
    ...rootPlugins(live, { signal: options.hardStop }),
    definePlugin({ name: 'reloader', provides: ['reload'], start: (ctx) => ctx.provide('reload', reloader) }),
    loggerPlugin(options.logger),
    tracingPlugin,
    metricsPlugin,
    httpPlugin,
    actionsPlugin,
    channelTablePlugin,
    mcpPlugin,
    toolCallsPlugin,
    approvalsPlugin,
    workspacesPlugin,
    trackerPlugin,
    memoryTrimPlugin,
    chartsPlugin,
    supervisorPlugin,
    dispatcherPlugin,
    extensionsPlugin,
    statusPlugin,
    managementPlugin,
    remindersPlugin,
    schedulesPlugin,
  ];
}

export { singleNodePlugins } from './topology.js';
