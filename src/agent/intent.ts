/**
 * The reply-intent classifier: one small model call that judges whether an unaddressed
 * group message wants an answer from the bot. It answers one word, "reply" or "ignore";
 * anything else, a failure, or no answer in time counts as "ignore".
 */

export interface IntentModel {
  baseUrl: string;
  model: string;
  apiKey?: string;
  /** The longest the call may take; then the message is ignored. */
  timeoutMs: number;
}

export interface IntentLine {
  name: string;
  text: string;
}

export interface IntentVerdict {
  decision: 'reply' | 'ignore';
  latencyMs: number;
  inputTokens: number;
  outputTokens: number;
}

/** How many earlier group messages the classifier sees besides the newest. */
export const INTENT_CONTEXT_MESSAGES = 6;

export function intentPrompt(botName: string | undefined, lines: readonly IntentLine[]): { system: string; prompt: string } {
  const who = botName ? `the assistant bot "${botName}"` : 'the assistant bot';
  const system =
    `You decide whether ${who} should answer the newest message in a group chat. ` +
    'Answer "reply" only when the newest message asks the bot something, asks for help it can give, or continues a conversation with it; ' +
    'answer "ignore" for people talking among themselves. Answer with exactly one word: reply or ignore.';
  const context = lines.slice(0, -1).map((l) => `${l.name}: ${l.text}`);
  const newest = lines.at(-1);
  const prompt = `${context.length ? `Earlier messages:\n${context.join('\n')}\n\n` : ''}Newest message:\n${newest ? `${newest.name}: ${newest.text}` : ''}`;
  return { system, prompt };
}

/** The AI SDK loads only for channels that use the classifier. */
const load = () => Promise.all([import('ai'), import('@ai-sdk/openai-compatible')]);

/** Asks the intent model; never throws: a failure is "ignore", with its error for the log. */
export async function judgeIntent(
  m: IntentModel,
  botName: string | undefined,
  lines: readonly IntentLine[],
  signal?: AbortSignal,
): Promise<IntentVerdict & { error?: unknown }> {
  const started = performance.now();
  const timeout = AbortSignal.timeout(m.timeoutMs);
  try {
    const [{ streamText }, { createOpenAICompatible }] = await load();
    const provider = createOpenAICompatible({ name: 'channeld-intent', baseURL: m.baseUrl, includeUsage: true, ...(m.apiKey ? { apiKey: m.apiKey } : {}) });
    const { system, prompt } = intentPrompt(botName, lines);
    let failure: unknown;
    const result = streamText({
      model: provider.chatModel(m.model),
      system,
      prompt,
      maxOutputTokens: 5,
      temperature: 0,
      maxRetries: 0,
      onError: ({ error }) => void (failure = error),
      abortSignal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
    const text = (await result.text).trim().toLowerCase();
    if (failure) throw failure;
    const usage = await result.usage;
    const decision = /^\W*reply\b/.test(text) ? 'reply' : 'ignore';
    return { decision, latencyMs: performance.now() - started, inputTokens: usage.inputTokens ?? 0, outputTokens: usage.outputTokens ?? 0 };
  } catch (error) {
    return { decision: 'ignore', latencyMs: performance.now() - started, inputTokens: 0, outputTokens: 0, error };
  }
}
