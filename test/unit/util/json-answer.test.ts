import { describe, expect, it } from 'vitest';
import { readJsonAnswer } from '../../../src/util/json-answer.js';

describe('readJsonAnswer', () => {
  it('parses JSON, keeps the text of what is not JSON', async () => {
    expect(await readJsonAnswer(new Response('{"a":1}'), 100)).toEqual({ text: '{"a":1}', json: { a: 1 } });
    expect(await readJsonAnswer(new Response('<html>'), 100)).toEqual({ text: '<html>', json: undefined });
    expect(await readJsonAnswer(new Response(''), 100)).toEqual({ text: '', json: {} });
  });

  it('refuses a declared or streamed body over the limit', async () => {
    expect(await readJsonAnswer(new Response('{}', { headers: { 'content-length': '1000' } }), 100)).toBe('too_large');
    const stream = new ReadableStream<Uint8Array>({
      pull(c) {
        c.enqueue(new Uint8Array(64).fill(32));
      },
    });
    expect(await readJsonAnswer(new Response(stream), 1000)).toBe('too_large');
  });
});
