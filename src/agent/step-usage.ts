import type { LanguageModelMiddleware } from 'ai';
import type { Usage } from '../contracts/agent-events.js';

type WrapStream = NonNullable<LanguageModelMiddleware['wrapStream']>;
type StreamPart = Awaited<ReturnType<WrapStream>>['stream'] extends ReadableStream<infer P> ? P : never;

/**
 * Tells `onStep` each model step's tokens as soon as the provider reports them. The AI SDK's
 * own `finish-step` part waits until the step's tool calls have finished, so a turn blocked
 * in a long tool would show no usage until then; this reads the provider's `finish` part
 * below the SDK, before any tool runs. A step whose provider reports no counts is not told
 * (the turn's `done` estimates those).
 */
export function stepUsageMiddleware(onStep: (usage: Usage) => void): LanguageModelMiddleware {
  const wrapStream: WrapStream = async ({ doStream }) => {
    const inner = await doStream();
    const watch = new TransformStream<StreamPart, StreamPart>({
      transform(part, controller) {
        if (part.type === 'finish') {
          const u = part.usage;
          const inputTokens = u.inputTokens.total ?? 0;
          const outputTokens = u.outputTokens.total ?? 0;
          if (inputTokens > 0 || outputTokens > 0)
            onStep({ inputTokens, outputTokens, reasoningTokens: u.outputTokens.reasoning ?? 0, cachedTokens: u.inputTokens.cacheRead ?? 0, estimated: false });
        }
        controller.enqueue(part);
      },
    });
    return { ...inner, stream: inner.stream.pipeThrough(watch) };
  };
  return { specificationVersion: 'v3', wrapStream };
}
