import { describe, expect, it, vi } from 'vitest';
import { ProgressCoalescer } from '../../../src/mcp/progress.js';
import { ThrottledReadBuffer } from '../../../src/mcp/stdio-buffer.js';

const progress = (i: number) => `${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: i } })}\n`;

describe('MCP progress thinning', () => {
  it('the coalescer sends the first line at once, then only the latest per interval, cut; close sends the pending one', () => {
    vi.useFakeTimers();
    try {
      const lines: string[] = [];
      const c = new ProgressCoalescer((l) => lines.push(l), { intervalMs: 100, maxChars: 10 });
      for (let i = 0; i < 20_000; i++) c.push(`${i} ${'p'.repeat(500)}`);
      expect(lines).toEqual(['0 pppppppp…']);
      vi.advanceTimersByTime(100);
      expect(lines).toEqual(['0 pppppppp…', '19999 pppp…']);
      c.push('last');
      c.close();
      expect(lines.at(-1)).toBe('last');
      c.push('after close');
      vi.advanceTimersByTime(1000);
      expect(lines.at(-1)).toBe('last');
    } finally {
      vi.useRealTimers();
    }
  });

  it('the stdio buffer parses one progress line per interval and hands the latest skipped one over before the next other message', () => {
    const b = new ThrottledReadBuffer({ maxBufferSize: 10_000_000, intervalMs: 60_000 });
    const result = `${JSON.stringify({ jsonrpc: '2.0', id: 3, result: { content: [] } })}\n`;
    b.append(Buffer.from(Array.from({ length: 1000 }, (_, i) => progress(i)).join('') + result));
    const read = [];
    for (let m = b.readMessage(); m; m = b.readMessage()) read.push(m);
    expect(read).toEqual([JSON.parse(progress(0)), JSON.parse(progress(999)), JSON.parse(result)]);
  });
});
