import { extractReasoningMiddleware, type LanguageModelMiddleware } from 'ai';
import { describe, expect, it } from 'vitest';
import { thinkTagMiddleware } from '../../../src/agent/think-tags.js';

type WrapStream = NonNullable<LanguageModelMiddleware['wrapStream']>;

/** Runs text deltas (one text block, id "t") through a middleware; returns what came out, in order. */
async function through(mw: LanguageModelMiddleware, deltas: string[]): Promise<Array<{ kind: 'text' | 'reasoning'; text: string }>> {
  const parts = [{ type: 'text-start', id: 't' }, ...deltas.map((delta) => ({ type: 'text-delta', id: 't', delta })), { type: 'text-end', id: 't' }];
  const stream = new ReadableStream({
    start(c) {
      for (const p of parts) c.enqueue(p);
      c.close();
    },
  });
  const options = {
    doStream: async () => ({ stream }),
    doGenerate: async () => ({}),
    params: { prompt: [] },
    model: {},
  } as unknown as Parameters<WrapStream>[0];
  const { stream: out } = await mw.wrapStream!(options);
  const seen: Array<{ kind: 'text' | 'reasoning'; text: string }> = [];
  for await (const p of out as ReadableStream<{ type: string; delta?: string }>) {
    if (p.type === 'text-delta') seen.push({ kind: 'text', text: p.delta! });
    if (p.type === 'reasoning-delta') seen.push({ kind: 'reasoning', text: p.delta! });
  }
  return seen;
}

describe('thinkTagMiddleware (the AI SDK extractReasoningMiddleware, flushed at text end)', () => {
  it('holds back only what could still be a tag, across chunk boundaries', async () => {
    expect(await through(thinkTagMiddleware(), ['a <', 'think', '>x</think', '> y'])).toEqual([
      { kind: 'text', text: 'a ' },
      { kind: 'reasoning', text: 'x' },
      { kind: 'text', text: ' y' },
    ]);
    expect(await through(thinkTagMiddleware(), ['<thinking is fun'])).toEqual([{ kind: 'text', text: '<thinking is fun' }]);
  });

  it('keeps the text around a think block exactly as it came (no separator)', async () => {
    const out = await through(thinkTagMiddleware(), ['Sure. <think>plans</think>Done']);
    expect(
      out
        .filter((p) => p.kind === 'text')
        .map((p) => p.text)
        .join(''),
    ).toBe('Sure. Done');
    expect(
      out
        .filter((p) => p.kind === 'reasoning')
        .map((p) => p.text)
        .join(''),
    ).toBe('plans');
  });

  it('a text that ends in what could have been a tag keeps those characters', async () => {
    expect(await through(thinkTagMiddleware(), ['x is a <'])).toEqual([
      { kind: 'text', text: 'x is a ' },
      { kind: 'text', text: '<' },
    ]);
    // Reasoning cut off (max_output_tokens) inside its closing tag keeps its tail as reasoning.
    expect(await through(thinkTagMiddleware(), ['<think>hmm</th'])).toEqual([
      { kind: 'reasoning', text: 'hmm' },
      { kind: 'reasoning', text: '</th' },
    ]);
    // Why the wrapper exists: the SDK's middleware alone drops the held-back tail. When this
    // fails, the SDK flushes at the end itself and thinkTagMiddleware can be the SDK's alone.
    expect(await through(extractReasoningMiddleware({ tagName: 'think', separator: '' }), ['x is a <'])).toEqual([{ kind: 'text', text: 'x is a ' }]);
  });
});
