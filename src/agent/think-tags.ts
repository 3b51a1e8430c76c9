import { extractReasoningMiddleware, type LanguageModelMiddleware } from 'ai';

type WrapStream = NonNullable<LanguageModelMiddleware['wrapStream']>;
type StreamPart = Awaited<ReturnType<WrapStream>>['stream'] extends ReadableStream<infer P> ? P : never;

/** Appended to each text's last delta; no tag contains it, so it ends any tag prefix held back. */
const TEXT_END = '\u0000';

/**
 * `<think>…</think>` reasoning that models served by Ollama, vLLM or llama.cpp write inline
 * in their text (Qwen3, DeepSeek R1) becomes reasoning parts: the AI SDK's
 * `extractReasoningMiddleware`, which also handles tags split across chunks ("<thi" + "nk>")
 * by holding back a possible tag prefix until the next chunk decides it. Two things on top:
 *
 * - `separator: ''`: the SDK would put "\n" where a think block was cut out of the text;
 *   the model's own words are kept exactly as they came.
 * - A flush at the end of each text: the SDK keeps a held-back prefix in its buffer and,
 *   having no flush, drops it when the stream ends, so an answer ending in "<" or "</th"
 *   (cut off by max_output_tokens) would lose those characters (vercel/ai#15583, not in
 *   ai 6.0). Before each `text-end` this adds a delta holding only TEXT_END, which makes the
 *   SDK publish what it held; the mark is then taken out of its output again.
 */
export function thinkTagMiddleware(): LanguageModelMiddleware {
  const sdk = extractReasoningMiddleware({ tagName: 'think', separator: '' });
  const wrapStream: WrapStream = async (options) => {
    const result = await sdk.wrapStream!({
      ...options,
      doStream: async () => {
        const inner = await options.doStream();
        return { ...inner, stream: inner.stream.pipeThrough(markTextEnds()) };
      },
    });
    return { ...result, stream: result.stream.pipeThrough(unmarkTextEnds()) };
  };
  return { specificationVersion: 'v3', wrapStream, ...(sdk.wrapGenerate ? { wrapGenerate: sdk.wrapGenerate } : {}) };
}

function markTextEnds(): TransformStream<StreamPart, StreamPart> {
  return new TransformStream({
    transform(part, controller) {
      if (part.type === 'text-end') controller.enqueue({ type: 'text-delta', id: part.id, delta: TEXT_END });
      controller.enqueue(part);
    },
  });
}

function unmarkTextEnds(): TransformStream<StreamPart, StreamPart> {
  return new TransformStream({
    transform(part, controller) {
      if ((part.type === 'text-delta' || part.type === 'reasoning-delta') && part.delta.endsWith(TEXT_END)) {
        const delta = part.delta.slice(0, -TEXT_END.length);
        if (delta) controller.enqueue({ ...part, delta });
        return;
      }
      controller.enqueue(part);
    },
  });
}
