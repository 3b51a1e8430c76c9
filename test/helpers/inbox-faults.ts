import type { TestDaemon } from './daemon.js';

/** The daemon's next inbox write fails (a full disk, say); the ones after it succeed. */
export function failNextInboxAdd(d: TestDaemon): void {
  const inbox = d.daemon.inbox;
  const add = inbox.add.bind(inbox);
  let failOnce = true;
  inbox.add = (...args) => {
    if (failOnce) {
      failOnce = false;
      throw new Error('disk full');
    }
    return add(...args);
  };
}
