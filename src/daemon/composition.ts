import type { LoggerOptions } from '../observe/logger.js';
import type { LiveConfig } from './config-service.js';
import {
  actionsComponent,
  approvalsComponent,
  channelTableComponent,
  extensionsComponent,
  httpComponent,
  loggerComponent,
  mcpComponent,
  memoryTrimComponent,
  metricsComponent,
  rootComponents,
  supervisorComponent,
  toolCallsComponent,
  trackerComponent,
} from './core.js';
import { chartsComponent } from './charts.js';
import { dispatcherComponent } from './dispatch-wiring.js';
import { managementComponent } from './management.js';
import { remindersComponent } from './reminders.js';
import { schedulesComponent } from './schedules.js';
import { defineComponent, type DaemonComponent, type Services } from './services.js';
import { statusComponent } from './status.js';
import { workspacesComponent } from './workspaces.js';
import { tracingComponent } from './tracing.js';

/**
 * The components every daemon runs, whatever its mode: the one list the daemon loads and the
 * composition test plans, so the test checks the graph that really runs.
 */
export function coreComponents(
  live: LiveConfig,
  options: { hardStop: AbortSignal; reloader: Services['reload']; logger?: Partial<LoggerOptions> },
): DaemonComponent[] {
  const { reloader } = options;
  return [
    ...rootComponents(live, { signal: options.hardStop }),
    defineComponent({ name: 'reloader', provides: ['reload'], start: (ctx) => ctx.provide('reload', reloader) }),
    loggerComponent(options.logger),
    tracingComponent,
    metricsComponent,
    httpComponent,
    actionsComponent,
    channelTableComponent,
    mcpComponent,
    toolCallsComponent,
    approvalsComponent,
    workspacesComponent,
    trackerComponent,
    memoryTrimComponent,
    chartsComponent,
    supervisorComponent,
    dispatcherComponent,
    extensionsComponent,
    statusComponent,
    managementComponent,
    remindersComponent,
    schedulesComponent,
  ];
}

export { singleNodeComponents } from './topology.js';
