import { describe, expect, it } from 'vitest';
import { CodedError } from '../../../src/contracts/errors.js';
import { CancelledByUser, RunningCalls } from '../../../src/runtime/running-calls.js';

describe('RunningCalls', () => {
  it("/stop tool aborts the scope's calls with a coded reason (TOOL_CALL_CANCELLED), and only that scope's", () => {
    const calls = new RunningCalls();
    const mine = new AbortController();
    const other = new AbortController();
    const forget = calls.track('a', mine);
    calls.track('b', other);
    expect(calls.cancel('a')).toBe(1);
    expect(mine.signal.reason).toBeInstanceOf(CancelledByUser);
    expect(mine.signal.reason).toBeInstanceOf(CodedError);
    expect((mine.signal.reason as CodedError).code).toBe('TOOL_CALL_CANCELLED');
    expect(other.signal.aborted).toBe(false);
    forget();
    expect(calls.cancel('a')).toBe(0);
  });
});
