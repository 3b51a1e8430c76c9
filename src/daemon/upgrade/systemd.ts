import { execFile } from 'node:child_process';
import type { Logger } from '../../observe/logger.js';

/**
 * Tells systemd (a `Type=notify` unit with `NotifyAccess=all`) about this process: READY=1 at
 * start, and after an upgrade MAINPID= so the unit follows the new process and stays active.
 * Node has no unix datagram socket, so this runs `systemd-notify`; outside systemd
 * (no NOTIFY_SOCKET) it does nothing, and without the tool it logs once and goes on.
 */
export function notifySystemd(fields: string[], log: Logger, env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  if (!env.NOTIFY_SOCKET) return Promise.resolve(false);
  return new Promise((resolve) => {
    execFile('systemd-notify', fields, { timeout: 5000 }, (err) => {
      if (err)
        log.warn({ err, fields }, 'systemd-notify failed: systemd may not follow this process (install systemd-notify, or restart instead of upgrading)');
      resolve(!err);
    });
  });
}
