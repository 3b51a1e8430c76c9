import { jsonrepair } from 'jsonrepair';
import { InvalidToolInputError, type ModelMessage, type ToolCallRepairFunction, type ToolSet } from 'ai';

/** The JSON Schema the SDK derives from a tool's input schema (its type is not exported by name). */
type JSONSchema7 = Awaited<ReturnType<Parameters<ToolCallRepairFunction<ToolSet>>[0]['inputSchema']>>;
type JSONSchema7Definition = JSONSchema7 | boolean;

/** Argument texts longer than this are not repaired: a runaway answer is not worth the parse. */
export const MAX_REPAIR_CHARS = 64_000;

/** What the model reads with the validation error when its call could not be repaired. */
export const REPAIR_HINT =
  'Hint: call the tool again with arguments that are one JSON object matching its schema: double quotes, no trailing commas, numbers and booleans unquoted.';

/**
 * Arguments a small model got almost right, made right: parsed leniently (trailing commas,
 * single quotes, unquoted keys, Python constants) and coerced where the schema leaves no
 * doubt (a numeric string where a number is expected, "true" where a boolean is). Returns
 * the repaired JSON text, or undefined when there is nothing safe to repair.
 */
export function lenientArguments(text: string, schema: JSONSchema7 | undefined): string | undefined {
  if (text.length > MAX_REPAIR_CHARS) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(jsonrepair(text.trim() === '' ? '{}' : text));
  } catch {
    return undefined;
  }
  const fixed = JSON.stringify(schema ? coerce(value, schema, 0) : value);
  return fixed === text ? undefined : fixed;
}

/** Coerces scalars to the type the schema names; depth-bounded, leaves everything else as is. */
function coerce(value: unknown, schema: JSONSchema7Definition, depth: number): unknown {
  if (typeof schema !== 'object' || depth > 16) return value;
  const type = schema.type;
  if ((type === 'number' || type === 'integer') && typeof value === 'string' && /^\s*-?\d+(\.\d+)?\s*$/.test(value)) {
    const n = Number(value);
    return type === 'integer' && !Number.isInteger(n) ? value : n;
  }
  if (type === 'boolean' && (value === 'true' || value === 'false')) return value === 'true';
  if (type === 'string' && typeof value === 'number') return String(value);
  if (Array.isArray(value) && schema.items && !Array.isArray(schema.items))
    return value.map((v) => coerce(v, schema.items as JSONSchema7Definition, depth + 1));
  if (value && typeof value === 'object' && !Array.isArray(value) && schema.properties) {
    const props = schema.properties;
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, props[k] ? coerce(v, props[k], depth + 1) : v]));
  }
  return value;
}

/**
 * One turn's tool-call repairs. The SDK calls `repair` at most once per call whose arguments
 * fail to parse or validate; the repaired call is validated again by the SDK. A call that
 * still fails reaches the model as a tool error with `REPAIR_HINT` (see `hintMessages`), and
 * the model may try again once: a second failure of the same tool ends the turn
 * (`exhausted`).
 */
export class ToolRepairs {
  /** Calls the repair rewrote: id → the original failure. */
  readonly #repaired = new Map<string, string>();
  /** Calls that failed even after repair. */
  readonly #failed = new Set<string>();
  readonly #failuresByTool = new Map<string, number>();
  #exhaustedTool: string | undefined;

  readonly repair: ToolCallRepairFunction<ToolSet> = async ({ toolCall, inputSchema, error }) => {
    if (!InvalidToolInputError.isInstance(error)) return null; // an unknown tool name: nothing to repair
    const fixed = lenientArguments(toolCall.input, await inputSchema({ toolName: toolCall.toolName }));
    if (fixed === undefined) return null;
    this.#repaired.set(toolCall.toolCallId, shortError(error));
    return { ...toolCall, input: fixed };
  };

  /** A parsed call: the parse failure it had, or undefined when it had none. */
  parsed(call: { toolCallId: string; toolName: string; invalid?: boolean; error?: unknown }): { error: string; repaired: boolean } | undefined {
    if (call.invalid) {
      this.#failed.add(call.toolCallId);
      const n = (this.#failuresByTool.get(call.toolName) ?? 0) + 1;
      this.#failuresByTool.set(call.toolName, n);
      if (n >= 2) this.#exhaustedTool ??= call.toolName;
      return { error: shortError(call.error), repaired: false };
    }
    const was = this.#repaired.get(call.toolCallId);
    return was === undefined ? undefined : { error: was, repaired: true };
  }

  /** The tool the model failed to call twice in this turn, if any: the turn stops there. */
  get exhausted(): string | undefined {
    return this.#exhaustedTool;
  }

  /** The step's messages with the hint added to each failed call's error. */
  hintMessages(messages: ModelMessage[]): ModelMessage[] {
    if (this.#failed.size === 0) return messages;
    return messages.map((m) => {
      if (m.role !== 'tool') return m;
      return {
        ...m,
        content: m.content.map((part) =>
          part.type === 'tool-result' && this.#failed.has(part.toolCallId) && part.output.type === 'error-text' && !part.output.value.endsWith(REPAIR_HINT)
            ? { ...part, output: { ...part.output, value: `${part.output.value}\n${REPAIR_HINT}` } }
            : part,
        ),
      };
    });
  }
}

/** The validation failure in a line or two: what the model and the log need, not the whole input. */
function shortError(err: unknown): string {
  const cause = InvalidToolInputError.isInstance(err) && err.cause instanceof Error ? err.cause.message : err instanceof Error ? err.message : String(err);
  return cause.length > 500 ? `${cause.slice(0, 500)}…` : cause;
}
