import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DiscordAdapter } from '../../../channels/discord/adapter.js';
import { createLogger } from '../../../src/observe/logger.js';
import { openFenceAt } from '../../../src/util/chunk.js';
import { LogSink } from '../../helpers/daemon.js';
import { RecordingAdapter } from '../../helpers/recording-adapter.js';
import { streamOn } from '../../helpers/reply-stream.js';

/** Prose with fenced code blocks (with and without a language), long enough to cross 2000. */
const piece = fc.oneof(
  { weight: 6, arbitrary: fc.stringMatching(/^[a-z]{1,12}$/) },
  { weight: 3, arbitrary: fc.constantFrom(' ', ' ', '. ', '\n', '\n\n') },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.constantFrom('ts', 'python', 'rust', ''), fc.array(fc.stringMatching(/^[a-z =();{}]{0,60}$/), { maxLength: 60 }))
      .map(([lang, lines]) => `\n\`\`\`${lang}\n${lines.join('\n')}\n\`\`\`\n`),
  },
);
const answer = fc.array(piece, { minLength: 50, maxLength: 500 }).map((p) => p.join(''));

/** "opener|line" for each non-empty line inside a fenced block. */
function codeLines(md: string): string[] {
  const out: string[] = [];
  let opener: string | undefined;
  for (const line of md.split('\n')) {
    if (/^```/.test(line)) opener = opener === undefined ? line : undefined;
    else if (opener !== undefined && line.trim()) out.push(`${opener}|${line}`);
  }
  return out;
}

describe('Discord: long answers split at 2000', () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());
  const discord = new DiscordAdapter(
    { id: 'dc', restApi: 'http://127.0.0.1:9/api', guilds: [], log: createLogger({ level: 'silent', destination: new LogSink() }) },
    'token',
  );

  it('code blocks crossing the split are closed and reopened with their language; nothing is lost', async () => {
    await fc.assert(
      fc.asyncProperty(answer, async (text) => {
        const a = new RecordingAdapter('dc', discord.capabilities);
        const s = streamOn(a, {
          capabilities: discord.capabilities,
          target: { channelId: 'dc', chatId: 'c', chatType: 'group' },
          streamMode: 'final',
        });
        s.push({ type: 'text_delta', text });
        s.push({ type: 'done', usage: { inputTokens: 0, outputTokens: 0, estimated: true } });
        await vi.runAllTimersAsync();
        await s.finished();
        const parts = a.visible('c');
        if (!text.trim()) return;
        for (const p of parts) {
          expect(p.length).toBeLessThanOrEqual(2000);
          expect(openFenceAt(p)).toBeUndefined();
        }
        // Each code line shows inside a block with the same opening line (language included)
        // as in the answer: a block cut at 2000 is reopened with its language.
        const shown = new Set(parts.flatMap(codeLines));
        for (const pair of codeLines(text)) expect(shown).toContain(pair);
        // Every prose line arrives too.
        const all = parts.join('\n');
        for (const line of text.split('\n')) if (line.trim() && !/^```/.test(line)) expect(all).toContain(line.length > 40 ? line.slice(0, 40) : line);
      }),
      { numRuns: 60 },
    );
  });
});
