import type { LanguageModelMiddleware } from 'ai';
import { errorType, NO_SPAN, startSpan } from '../observe/trace/ambient.js';

type WrapStream = NonNullable<LanguageModelMiddleware['wrapStream']>;
type StreamPart = Awaited<ReturnType<WrapStream>>['stream'] extends ReadableStream<infer P> ? P : never;

/** Where the model is served, for the spans' `server.address` and `server.port`. */
function server(baseUrl: string): { 'server.address'?: string; 'server.port'?: number } {
  try {
    const u = new URL(baseUrl);
    return { 'server.address': u.hostname, 'server.port': Number(u.port || (u.protocol === 'https:' ? 443 : 80)) };
  } catch {
    return {};
  }
}

/**
 * One span per model call (each request of each step, retries and fallback models
 * included), in the OpenTelemetry GenAI conventions: `chat <model>` with the operation,
 * provider, requested and answering model, token usage and finish reason. Neither the
 * prompt nor the answer is recorded. Outside a traced message it passes the stream through.
 */
export function traceMiddleware(provider: string, baseUrl: string): LanguageModelMiddleware {
  const where = server(baseUrl);
  const wrapStream: WrapStream = async ({ doStream, params, model }) => {
    const span = startSpan(
      `chat ${model.modelId}`,
      {
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': provider,
        'gen_ai.request.model': model.modelId,
        'gen_ai.request.max_tokens': params.maxOutputTokens,
        'gen_ai.request.temperature': params.temperature,
        ...where,
      },
      'client',
    );
    if (span === NO_SPAN) return doStream();
    let result: Awaited<ReturnType<typeof doStream>>;
    try {
      result = await doStream();
    } catch (err) {
      span.fail(errorType(err));
      span.end();
      throw err;
    }
    // A stream abandoned mid-way (the turn cancelled) ends its span too.
    const abandoned = () => span.end();
    params.abortSignal?.addEventListener('abort', abandoned, { once: true });
    const watch = new TransformStream<StreamPart, StreamPart>({
      transform(part, controller) {
        if (part.type === 'response-metadata') span.set({ 'gen_ai.response.model': part.modelId, 'gen_ai.response.id': part.id });
        else if (part.type === 'error') span.fail(errorType(part.error));
        else if (part.type === 'finish') {
          span.set({
            'gen_ai.usage.input_tokens': part.usage.inputTokens.total,
            'gen_ai.usage.output_tokens': part.usage.outputTokens.total,
            'gen_ai.response.finish_reasons': part.finishReason.unified,
          });
        }
        controller.enqueue(part);
      },
      flush() {
        params.abortSignal?.removeEventListener('abort', abandoned);
        span.end();
      },
    });
    return { ...result, stream: result.stream.pipeThrough(watch) };
  };
  return { specificationVersion: 'v3', wrapStream };
}
