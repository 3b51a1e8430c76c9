/**
 * An amount of money (budgets, costs) for people to read: two decimals from 1 up, and below
 * that as many as it takes (up to six), so a budget of 0.0001 reads "0.0001", not "0.00".
 */
export function formatAmount(n: number): string {
  if (n === 0 || Math.abs(n) >= 1) return n.toFixed(2);
  const fixed = n.toFixed(6).replace(/0+$/, '');
  return fixed.length - fixed.indexOf('.') - 1 < 2 ? n.toFixed(2) : fixed;
}
