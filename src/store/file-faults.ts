import type { StorageReporter } from '../contracts/channel.js';
import type { Logger } from '../observe/logger.js';
import type { GroupCommit } from './group-commit.js';

/**
 * The storage reporter handed to channels that write files themselves (web chat uploads).
 * A disk that refused the write turns the storage health degraded, as a failed database write
 * does (same log line, gauge and counter); the retry loop's probe brings it back as soon as the
 * database takes a write. A used-up quota is only counted: the disk itself still takes writes,
 * and refusing every new message because one client filled its quota would be wrong.
 */
export function fileFaultReporter(group: GroupCommit, count: (code: string) => void, log: Logger): StorageReporter {
  return {
    report(err) {
      const code = err.code ?? 'EIO';
      if (code === 'QUOTA') {
        count(code);
        log.warn({ code, err: err.message }, 'a file was refused: its storage quota is used up');
        return;
      }
      group.failed(Object.assign(new Error(err.message), { code }));
    },
  };
}
