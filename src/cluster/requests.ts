import type { Msg, Subscription } from '@nats-io/transport-node';
import type { Logger } from '../observe/logger.js';
import type { ClusterServices } from './connect.js';

/**
 * Subscribes to requests between instances (`/stop`, controls) on `subject`: each body is
 * read as JSON, an unreadable one is logged and left unanswered (the sender's request
 * times out), and `handle` gets the rest; `what` names them in the log.
 */
export function serveRequests<T>(s: ClusterServices, subject: string, what: string, log: Logger, handle: (req: T, msg: Msg) => void): Subscription {
  return s.nc.subscribe(subject, {
    callback: (err, msg) => {
      if (err) return void log.warn({ err }, `${what} subscription failed`);
      let req: T;
      try {
        req = msg.json<T>();
      } catch {
        return void log.warn({ subject: msg.subject }, `unreadable ${what} request ignored`);
      }
      handle(req, msg);
    },
  });
}
