import { describe, expect, it } from 'vitest';
import { formatAmount } from '../../../src/util/money.js';

describe('formatAmount', () => {
  it('prints small budgets with the digits they need, and the rest with two decimals', () => {
    expect(formatAmount(0.0001)).toBe('0.0001');
    expect(formatAmount(0.000027)).toBe('0.000027');
    expect(formatAmount(0.5)).toBe('0.50');
    expect(formatAmount(0)).toBe('0.00');
    expect(formatAmount(8)).toBe('8.00');
    expect(formatAmount(1.23456)).toBe('1.23');
  });
});
