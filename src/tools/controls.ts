import type { DispatcherOptions } from '../dispatch/dispatcher.js';
import type { Runtime } from '../runtime/runtime.js';
import type { ApprovalCoordinator } from './approvals.js';
import type { RunningCalls } from '../runtime/running-calls.js';

/**
 * The tool commands that act on a running turn, on the dispatcher's fast path: `/approve`
 * and `/deny` (typed or a button's payload) and `/stop tool`, which cancels only the
 * running tool call so the model goes on with "cancelled by the user".
 */
export function toolControls(approvals: ApprovalCoordinator, running: RunningCalls): NonNullable<DispatcherOptions['control']> {
  return (msg, scope, cmd) => {
    if (cmd.name === 'approve' || cmd.name === 'deny') {
      const verdict = cmd.name;
      return async () => approvals.decide(msg, scope, verdict, cmd.args.split(/\s+/)[0] ?? '');
    }
    if (cmd.name === 'stop' && cmd.args.toLowerCase() === 'tool') {
      return async () => (running.cancel(scope) ? 'Cancelled the running tool call; the answer goes on.' : 'No tool call is running here.');
    }
    return undefined;
  };
}

/** /help entries; the dispatcher handles these before a turn exists. */
export function registerToolCommands(runtime: Runtime): void {
  runtime.commands.register({
    name: 'approve',
    usage: '[ID]',
    help: 'approve the tool call waiting for your approval',
    handler: () => 'Nothing is waiting for approval here.',
  });
  runtime.commands.register({
    name: 'deny',
    usage: '[ID]',
    help: 'deny the tool call waiting for your approval',
    handler: () => 'Nothing is waiting for approval here.',
  });
}
