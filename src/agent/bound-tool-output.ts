import type { ModelMessage } from 'ai';
import { cutText, isCutText } from '../util/cut-text.js';

/**
 * The messages with every tool output text cut to `max` characters. Tool results are cut by
 * the runtime already; this catches the texts the SDK writes itself, such as the unknown-tool
 * error that names every offered tool, so nothing reaches the model past the result bound.
 */
export function boundToolOutputs(messages: ModelMessage[], max: number): ModelMessage[] {
  // A text the runtime cut already carries its note, which makes it a little longer than `max`.
  const fits = (text: string) => text.length <= max || isCutText(text);
  return messages.map((m) => {
    if (m.role !== 'tool') return m;
    return {
      ...m,
      content: m.content.map((part) => {
        if (part.type !== 'tool-result') return part;
        const out = part.output;
        if ((out.type === 'text' || out.type === 'error-text') && !fits(out.value)) return { ...part, output: { ...out, value: cutText(out.value, max) } };
        if (out.type === 'json' || out.type === 'error-json') {
          // The runtime's own cut results: a cut string, or `{ error }` with a cut text.
          const v = out.value;
          if (typeof v === 'string' && isCutText(v)) return part;
          if (v && typeof v === 'object' && 'error' in v && typeof v.error === 'string' && isCutText(v.error)) return part;
          const json = JSON.stringify(out.value) ?? '';
          if (!fits(json)) return { ...part, output: { type: out.type === 'json' ? 'text' : 'error-text', value: cutText(json, max) } };
        }
        return part;
      }),
    } as ModelMessage;
  });
}
