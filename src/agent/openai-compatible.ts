import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { stepCountIs, streamText, tool, wrapLanguageModel, type ModelMessage, type ToolSet } from 'ai';
import { sleep } from '../util/abortable.js';
import type { Tool } from '../contracts/tools.js';
import { estimateTokens, type AgentEvent } from '../contracts/agent-events.js';
import { CodedError, userText } from '../contracts/errors.js';
import { Attempt } from './attempt.js';
import { classifyProviderError, scrubProviderMessage } from './provider-errors.js';
import { boundedEventFetch, eventCapBytes, OutputCap, outputCapChars } from './output-cap.js';
import type { AgentContext, AgentInput, AgentRunner } from '../contracts/agent-runner.js';
import { boundToolOutputs } from './bound-tool-output.js';
import { thinkTagMiddleware } from './think-tags.js';
import { stepUsageMiddleware } from './step-usage.js';
import { ToolRepairs } from './tool-repair.js';
import { traceMiddleware } from './trace-middleware.js';
import { IdleTimer } from './idle-timer.js';
import { errorType, inSpan } from '../observe/trace/ambient.js';

export interface OpenAICompatibleOptions {
  baseUrl: string;
  model: string;
  apiKey?: string;
  temperature?: number;
  maxOutputTokens: number;
  /** The longest wait for the model's next piece of output (not counting while a tool call runs). */
  requestTimeoutMs: number;
  maxSteps: number;
  timeZone: string;
  /** Tool output texts the SDK writes itself (an unknown tool's error) are cut to this too. */
  maxToolResultChars?: number;
  /** Retries of a request that failed before any visible text. */
  retries?: number;
  retryBaseMs?: number;
  /** Told about every failed attempt (the workspace logs one warn line each). */
  onAttemptFailed?: (failure: AttemptFailure) => void;
  /** Told about every tool call whose arguments failed to parse or validate, repaired or not. */
  onToolCallInvalid?: (tool: string, repaired: boolean) => void;
}

/** One failed model attempt, as logged: never the API key. */
export interface AttemptFailure {
  model: string;
  /** The base URL's host, e.g. "api.openai.com". */
  baseUrlHost: string;
  status: number | undefined;
  code: string;
  /** The provider's message, scrubbed of keys and tokens; or why no answer came. */
  message: string;
  attempt: number;
  /** Whether another attempt follows. */
  retrying: boolean;
}

/**
 * A turn's tool log lines in order with its events. The SDK starts a tool before this
 * runner has read the call from the stream, so a line logged at once would reach the
 * reply before its tool_start (and the reply's progress line drops a log of no running
 * tool). Lines of a call not yet announced wait and follow its tool_start; later ones go
 * to the turn at once, while the runner waits on the model.
 */
class ToolLogs {
  readonly #early = new Map<string, string[]>();
  readonly #announced = new Set<string>();

  constructor(private readonly emit: ((event: AgentEvent) => void) | undefined) {}

  log(id: string, text: string): void {
    if (this.#announced.has(id)) this.emit?.({ type: 'tool_log', id, text });
    else this.#early.set(id, [...(this.#early.get(id) ?? []), text]);
  }

  /** Call after the call's tool_start went out: the lines it logged before that. */
  announced(id: string): AgentEvent[] {
    this.#announced.add(id);
    const early = this.#early.get(id) ?? [];
    this.#early.delete(id);
    return early.map((text) => ({ type: 'tool_log', id, text }));
  }
}

/**
 * Where each call sits in the turn: its model step and its place among that step's calls.
 * The SDK asks `prepareStep` before each step and starts a step's calls in the order the
 * model made them, so a turn re-run after a restart gives the same call the same position
 * (the provider's call ids are new on every request, so they cannot identify it).
 */
class CallPositions {
  #step = 0;
  #next = 0;

  enter(step: number): void {
    this.#step = step;
    this.#next = 0;
  }

  next(): { step: number; index: number } {
    return { step: this.#step, index: this.#next++ };
  }
}

/** Runs tools for the SDK; a tool that throws returns its error to the model. The model's idle bound waits while one runs. */
function toolSet(tools: readonly Tool[], ctx: AgentContext, timeZone: string, logs: ToolLogs, positions: CallPositions, idle: IdleTimer): ToolSet {
  const set: ToolSet = {};
  for (const t of tools) {
    set[t.name] = tool({
      description: t.description,
      inputSchema: t.input,
      execute: async (input: unknown, { abortSignal, toolCallId }) => {
        const position = positions.next();
        const resume = idle.pause();
        // The GenAI conventions' tool span: its name and call id, never its input or output.
        const attributes = {
          'gen_ai.operation.name': 'execute_tool',
          'gen_ai.tool.name': t.name,
          'gen_ai.tool.call.id': toolCallId,
          'gen_ai.tool.type': 'function',
        };
        return inSpan(`execute_tool ${t.name}`, attributes, async (span) => {
          try {
            const log = (text: string) => logs.log(toolCallId, text);
            return await t.run(input, {
              signal: abortSignal ?? ctx.signal,
              scope: ctx.scope,
              timeZone,
              callId: toolCallId,
              position,
              log,
              ...(ctx.message ? { message: ctx.message } : {}),
            });
          } catch (err) {
            span.fail(errorType(err));
            return { error: err instanceof Error ? err.message : String(err) };
          }
        }).finally(resume);
      },
    });
  }
  return set;
}

/**
 * Any OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, llama.cpp, LM Studio) through the
 * AI SDK: streams text, reasoning (also `<think>` inline), tool calls over several steps,
 * and usage. Retries connection failures, timeouts, 5xx and 429 only while the attempt has
 * shown nothing: no text and no tool call (a tool may have side effects).
 */
export class OpenAICompatibleRunner implements AgentRunner {
  readonly name = 'openai-compatible';
  readonly #o: OpenAICompatibleOptions;
  readonly #provider;

  constructor(options: OpenAICompatibleOptions) {
    this.#o = options;
    this.#provider = createOpenAICompatible({
      name: 'channeld',
      baseURL: options.baseUrl,
      includeUsage: true,
      // One server-sent event that never ends fails the call, not only the idle timeout.
      fetch: boundedEventFetch(eventCapBytes(outputCapChars(options.maxOutputTokens))),
      ...(options.apiKey ? { apiKey: options.apiKey } : {}),
    });
  }

  get model(): string {
    return this.#o.model;
  }

  async *run(input: AgentInput, ctx: AgentContext, signal: AbortSignal): AsyncIterable<AgentEvent> {
    const retries = this.#o.retries ?? 2;
    let outChars = 0;
    let toolCalls = 0;
    for (let attempt = 0; ; attempt++) {
      // Text and tool calls are visible progress: after them, no retry (tools would run twice).
      const shown = new Attempt();
      const controller = new AbortController();
      const onAbort = () => controller.abort(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      let timedOut = false;
      const idle = new IdleTimer(this.#o.requestTimeoutMs, () => {
        timedOut = true;
        controller.abort(new CodedError('PROVIDER_TIMEOUT', 'model timed out'));
      });
      let failure: unknown;
      let ended = false;
      // Each model call may write max_output_tokens' worth, enforced here too: a server may ignore it.
      const cap = new OutputCap(outputCapChars(this.#o.maxOutputTokens));
      try {
        idle.touch();
        const logs = new ToolLogs(ctx.emit);
        const positions = new CallPositions();
        const repairs = new ToolRepairs();
        const messages: ModelMessage[] = [...input.history.map((m) => ({ role: m.role, content: m.content }) as ModelMessage), userMessage(input)];
        const result = streamText({
          model: wrapLanguageModel({
            model: this.#provider.chatModel(input.model ?? this.#o.model),
            // The first middleware is the outermost: step usage sees the provider's parts last, as the SDK gets them.
            middleware: [
              stepUsageMiddleware((usage) => ctx.emit?.({ type: 'usage', usage })),
              thinkTagMiddleware(),
              traceMiddleware('openai-compatible', this.#o.baseUrl),
            ],
          }),
          system: input.system,
          messages,
          ...(input.tools?.length
            ? {
                tools: toolSet(input.tools, ctx, this.#o.timeZone, logs, positions, idle),
                // Small models get one lenient repair per bad call, then one retry per tool.
                experimental_repairToolCall: repairs.repair,
                stopWhen: [stepCountIs(this.#o.maxSteps), () => repairs.exhausted !== undefined],
              }
            : {}),
          // One prepareStep: it tells the tool positions which model step runs (approval keys),
          // adds the repair hint to failed calls' errors, and bounds every tool output the model is sent again.
          prepareStep: ({ stepNumber, messages: m }) => {
            if (!input.tools?.length) return undefined;
            positions.enter(stepNumber);
            const hinted = repairs.hintMessages(m);
            const bounded = this.#o.maxToolResultChars !== undefined ? boundToolOutputs(hinted, this.#o.maxToolResultChars) : hinted;
            // Tools waiting for a skill join the step after the skill was loaded.
            const activeTools = input.activeTools?.();
            if (bounded === m && !activeTools) return undefined;
            return { ...(bounded === m ? {} : { messages: bounded }), ...(activeTools ? { activeTools } : {}) };
          },
          ...(this.#o.temperature !== undefined ? { temperature: this.#o.temperature } : {}),
          maxOutputTokens: this.#o.maxOutputTokens,
          maxRetries: 0, // retries are ours: only before visible text
          onError: () => {}, // failures arrive as 'error' parts; the SDK would also print them
          abortSignal: controller.signal,
        });
        for await (const part of result.fullStream) {
          idle.touch();
          switch (part.type) {
            case 'start-step':
              cap.reset();
              break;
            case 'text-delta': {
              const kept = cap.take(part.text);
              outChars += kept.length;
              if (kept || !cap.over) yield* shown.take({ type: 'text_delta', text: kept });
              break;
            }
            case 'reasoning-delta': {
              const kept = cap.take(part.text);
              if (kept || !cap.over) yield* shown.take({ type: 'reasoning_delta', text: kept });
              break;
            }
            case 'tool-input-delta':
              cap.take(part.delta);
              break;
            case 'tool-call': {
              toolCalls++;
              const bad = repairs.parsed(part);
              if (bad) {
                this.#o.onToolCallInvalid?.(part.toolName, bad.repaired);
                yield* shown.take({ type: 'tool_call_invalid', id: part.toolCallId, name: part.toolName, error: bad.error, repaired: bad.repaired });
              }
              yield* shown.take({ type: 'tool_start', id: part.toolCallId, name: part.toolName, input: part.input });
              for (const e of logs.announced(part.toolCallId)) yield* shown.take(e);
              break;
            }
            case 'tool-result': {
              const out = part.output as { error?: string } | undefined;
              yield* shown.take(
                out && typeof out === 'object' && typeof out.error === 'string'
                  ? { type: 'tool_end', id: part.toolCallId, name: part.toolName, error: out.error }
                  : { type: 'tool_end', id: part.toolCallId, name: part.toolName, output: part.output },
              );
              break;
            }
            case 'tool-error':
              yield* shown.take({ type: 'tool_end', id: part.toolCallId, name: part.toolName, error: String(part.error) });
              break;
            case 'error':
              failure = part.error;
              break;
            case 'abort':
              failure ??= new Error('aborted');
              break;
            case 'finish': {
              if (failure) break;
              if (repairs.exhausted !== undefined) {
                ended = true;
                yield* shown.take({ type: 'error', code: 'TOOL_CALL_INVALID', message: userText('TOOL_CALL_INVALID') });
                break;
              }
              // No words at all: nothing for the user to read, which would look like silence. A
              // model that called tools and stopped may have meant it (its tools spoke); one that
              // ran out of steps or tokens, or was filtered, did not. A firing or a background
              // result nobody typed may have nothing to say.
              const cut = part.finishReason === 'tool-calls' || part.finishReason === 'length' || part.finishReason === 'content-filter';
              if (!outChars && (!toolCalls || cut) && !ctx.message?.synthetic) {
                ended = true;
                yield* shown.take({ type: 'error', code: 'ANSWER_EMPTY', message: userText('ANSWER_EMPTY') });
                break;
              }
              const u = part.totalUsage;
              const reported = (u.inputTokens ?? 0) > 0 || (u.outputTokens ?? 0) > 0;
              const inChars = input.system.length + input.text.length + input.history.reduce((n, m) => n + m.content.length, 0);
              ended = true;
              yield* shown.take({
                type: 'done',
                usage: reported
                  ? {
                      inputTokens: u.inputTokens ?? 0,
                      outputTokens: u.outputTokens ?? 0,
                      reasoningTokens: u.outputTokenDetails?.reasoningTokens ?? 0,
                      cachedTokens: u.inputTokenDetails?.cacheReadTokens ?? 0,
                      estimated: false,
                    }
                  : { inputTokens: estimateTokens(inChars), outputTokens: estimateTokens(outChars), estimated: true },
              });
              break;
            }
          }
          if (cap.over) failure = cap.error();
          if (ended || failure) break;
        }
      } catch (err) {
        failure = err;
      } finally {
        idle.stop();
        signal.removeEventListener('abort', onAbort);
        if (!controller.signal.aborted && !ended) controller.abort();
      }
      if (ended) return;
      if (signal.aborted) return yield { type: 'cancelled' };
      const f = classifyProviderError(failure ?? new Error('the model stream ended without finishing'), timedOut);
      const retrying = !shown.visible && f.retryable && attempt < retries;
      this.#o.onAttemptFailed?.({
        model: input.model ?? this.#o.model,
        baseUrlHost: hostOf(this.#o.baseUrl),
        status: f.status,
        code: f.code,
        message: scrubProviderMessage(f.providerMessage ?? f.detail, this.#o.apiKey),
        attempt: attempt + 1,
        retrying,
      });
      if (retrying) {
        await sleep(f.retryAfterMs ?? (this.#o.retryBaseMs ?? 500) * 2 ** attempt, signal);
        if (signal.aborted) return yield { type: 'cancelled' };
        continue;
      }
      return yield* shown.take({ type: 'error', code: f.code, message: userText(f.code) });
    }
  }
}

/** The user's turn: plain text, or text and image parts when images came with it. */
function userMessage(input: AgentInput): ModelMessage {
  if (!input.images?.length) return { role: 'user', content: input.text };
  return {
    role: 'user',
    content: [{ type: 'text', text: input.text }, ...input.images.map((i) => ({ type: 'image' as const, image: i.data, mediaType: i.mediaType }))],
  };
}

function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return 'unparsable base_url';
  }
}
