import { describe, expect, it } from 'vitest';
import { MAX_DURATION_MS } from '../../../src/config/schema.js';
import { configProblems } from '../../helpers/config.js';

const problems = (source: string): string[] => configProblems(source);

const web = `[[channels]]\nid = "web"\ntype = "webchat"\n`;

describe('durations have a maximum below what Node timers clamp to 1 ms', () => {
  it('stays below 2^31 ms', () => {
    expect(MAX_DURATION_MS).toBeLessThan(2 ** 31);
  });

  it.each([
    ['[daemon]\nshutdown_grace_ms = 2147483648\n', 'daemon.shutdown_grace_ms', 2],
    [`${web}connect_timeout_ms = 2147483648\n`, 'channels[0].connect_timeout_ms', 4],
    [`${web}[channels.backoff]\ninitial_ms = 1e15\n`, 'channels[0].backoff.initial_ms', 5],
    [`${web}[channels.backoff]\nmax_ms = 2147483648\n`, 'channels[0].backoff.max_ms', 5],
    ['[agent]\nrequest_timeout_ms = 2147483648\n', 'agent.request_timeout_ms', 2],
    ['[agent]\ncooldown_ms = 2147483648\n', 'agent.cooldown_ms', 2],
    ['[limits]\ncollect_debounce_ms = 2147483648\n', 'limits.collect_debounce_ms', 2],
  ])('%s is refused with its line', (source, key, line) => {
    const lines = problems(source + (source.includes('[[channels]]') ? '' : web));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      new RegExp(`^daemon\\.config\\.toml:${line}:\\d+: ${key.replace(/[.[\]]/g, '\\$&')}: .* is too big: must be at most ${MAX_DURATION_MS}$`),
    );
  });

  it('a day is still accepted', () => {
    expect(problems(`[daemon]\nshutdown_grace_ms = ${MAX_DURATION_MS}\n${web}`)).toEqual([]);
  });
});
