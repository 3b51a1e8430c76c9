import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { chunkText, openFenceAt, splitOnce } from '../../../src/util/chunk.js';

/** Text made of words, sentences, lines, paragraphs and fenced code blocks. */
const piece = fc.oneof(
  { weight: 6, arbitrary: fc.stringMatching(/^[a-z]{1,12}$/) },
  { weight: 3, arbitrary: fc.constantFrom(' ', ' ', ' ', '. ', '! ', '\n', '\n\n') },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom('ts', 'python', ''), fc.array(fc.stringMatching(/^[a-z =();]{0,30}$/), { maxLength: 12 }))
      .map(([lang, lines]) => `\n\`\`\`${lang}\n${lines.join('\n')}\n\`\`\`\n`),
  },
  { weight: 1, arbitrary: fc.stringMatching(/^[a-z]{40,120}$/) },
);
const text = fc.array(piece, { maxLength: 300 }).map((p) => p.join(''));
const limit = fc.integer({ min: 60, max: 400 });

/**
 * Splits like chunkText and undoes what each split added: `skip` leading characters are a
 * reopened fence the original did not have, and each head's `tail` closed a fence.
 */
function undoSplits(t: string, max: number, skip = 0): { chunks: string[]; joined: string } {
  if (t.length <= max) return { chunks: [t], joined: t.slice(skip) };
  const s = splitOnce(t, max);
  const inner = undoSplits(s.rest, max, s.lead.length);
  return { chunks: [s.head, ...inner.chunks], joined: s.head.slice(skip, s.head.length - s.tail.length) + inner.joined };
}

describe('chunkText', () => {
  it('no chunk is over the limit', () => {
    fc.assert(fc.property(text, limit, (t, max) => chunkText(t, max).every((c) => c.length <= max)));
  });

  it('every chunk has balanced code fences', () => {
    fc.assert(fc.property(text, limit, (t, max) => chunkText(t, max).every((c) => openFenceAt(c) === undefined || openFenceAt(t) !== undefined)));
  });

  it('joining the chunks and removing the added fence lines gives the original text back', () => {
    fc.assert(
      fc.property(text, limit, (t, max) => {
        const { chunks, joined } = undoSplits(t, max);
        expect(chunks).toEqual(chunkText(t, max));
        expect(joined).toBe(t);
      }),
    );
  });

  it('cuts after a paragraph break when the window holds one past its first third', () => {
    fc.assert(
      fc.property(text, limit, (t, max) => {
        if (t.length <= max || t.slice(0, max).includes('```')) return;
        const window = t.slice(0, max);
        const para = window.lastIndexOf('\n\n');
        if (para <= max * 0.3) return;
        const { head } = splitOnce(t, max);
        expect(/\n\s*$/.test(head)).toBe(true);
        expect(head.length).toBeGreaterThan(max * 0.3);
      }),
    );
  });

  it('prefers line, then sentence, then word, and hard-cuts only a single overlong word', () => {
    expect(splitOnce('aaaa bbbb\ncccc dddd eeee', 16).head).toBe('aaaa bbbb\n');
    expect(splitOnce('Aaaa bbbb. Cccc dddd eeee', 16).head).toBe('Aaaa bbbb. ');
    expect(splitOnce('aaaa bbbb cccc dddd', 12).head).toBe('aaaa bbbb ');
    expect(splitOnce('x'.repeat(30), 10).head).toBe('x'.repeat(10));
  });

  it('closes a fence at the cut and reopens it with its language tag', () => {
    const code = Array.from({ length: 40 }, (_, i) => `line ${i}`).join('\n');
    const chunks = chunkText(`Intro.\n\n\`\`\`python\n${code}\n\`\`\`\nOutro.`, 120);
    expect(chunks.length).toBeGreaterThan(2);
    for (const c of chunks) expect(openFenceAt(c)).toBeUndefined();
    expect(chunks[1]!.startsWith('```python\n')).toBe(true);
    expect(chunks[0]!.endsWith('\n```')).toBe(true);
  });
});
