import { describe, expect, it } from 'vitest';
import { recallText } from '../../../src/memory/memory.js';

const row = (id: number, text: string) => ({ id, text, createdAt: id });

describe('memory recall text', () => {
  it('takes whole memories in order while they fit memory_max_chars, skipping one too long for the room left', () => {
    const rows = [row(1, 'a'.repeat(40)), row(2, 'b'.repeat(100)), row(3, 'c'.repeat(10))];
    const text = recallText('Ada', rows, 140)!;
    expect(text.length).toBeLessThanOrEqual(140);
    expect(text.split('\n')).toEqual([expect.stringContaining('Ada asked you to remember'), `- ${'a'.repeat(40)}`, `- ${'c'.repeat(10)}`]);
  });

  it('adds nothing when nothing fits or there is nothing', () => {
    expect(recallText('Ada', [row(1, 'x'.repeat(500))], 100)).toBeUndefined();
    expect(recallText('Ada', [], 2000)).toBeUndefined();
  });
});
