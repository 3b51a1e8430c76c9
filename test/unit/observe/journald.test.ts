import { fstatSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createLogger, underJournald } from '../../../src/observe/logger.js';
import { LogSink } from '../../helpers/daemon.js';

describe('logs under journald', () => {
  it('each line carries its syslog priority, so journalctl -p err finds the errors', () => {
    const sink = new LogSink();
    const log = createLogger({ level: 'debug', destination: sink, journald: true });
    log.debug('d');
    log.info('i');
    log.warn('w');
    log.error('e');
    log.fatal('f');
    expect(sink.lines.map((l) => /^<(\d)>\{/.exec(l)?.[1])).toEqual(['7', '6', '4', '3', '2']);
    expect(JSON.parse(sink.lines[3]!.slice(3))).toMatchObject({ level: 50, msg: 'e' });
  });

  it('is detected by JOURNAL_STREAM naming the device and inode of stdout, nothing else', () => {
    const st = fstatSync(1);
    expect(underJournald({ JOURNAL_STREAM: `${st.dev}:${st.ino}` })).toBe(true);
    expect(underJournald({ JOURNAL_STREAM: `${st.dev}:${st.ino + 1}` })).toBe(false);
    expect(underJournald({})).toBe(false);
  });
});
