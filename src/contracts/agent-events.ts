import type { ErrorCode } from './errors.js';

export interface Usage {
  inputTokens: number;
  outputTokens: number;
  /** Of the output, tokens spent reasoning; where the provider reports them. */
  reasoningTokens?: number;
  /** Of the input, tokens read from the provider's prompt cache; where reported. */
  cachedTokens?: number;
  /** True when the provider reported nothing and the counts were estimated from characters. */
  estimated: boolean;
}

/** What a runner yields during one turn. Failures are `error` events, never throws. */
export type AgentEvent =
  | { type: 'text_delta'; text: string }
  | { type: 'reasoning_delta'; text: string }
  | { type: 'tool_start'; id: string; name: string; input: unknown }
  | { type: 'tool_end'; id: string; name: string; output?: unknown; error?: string }
  | { type: 'tool_log'; id: string; text: string }
  /**
   * A tool call whose arguments were not JSON or failed the tool's schema. `repaired`: a
   * lenient parse fixed it and the call runs; otherwise the model is told `error` and may retry.
   */
  | { type: 'tool_call_invalid'; id: string; name: string; error: string; repaired: boolean }
  /**
   * One model step's tokens, as soon as the provider reports them (before that step's tool
   * calls run), so a running turn's usage shows in /usage; `done` still carries the turn's total.
   */
  | { type: 'usage'; usage: Usage }
  /** `model` says which "provider:model" served the turn. */
  | { type: 'done'; usage: Usage; model?: string }
  /** `keepChars`: the stored text ends there (the answer looped from that point on); the user still sees all of it. */
  | { type: 'error'; code: ErrorCode; message: string; keepChars?: number }
  | { type: 'cancelled' };

/** How a turn ended: the event that ended it. */
export type TurnEnding = Extract<AgentEvent, { type: 'done' | 'error' | 'cancelled' }>;
/** How a turn ended, by kind alone: what the inbox records and a stored turn keeps. The one definition of the union. */
export type TurnEndingKind = TurnEnding['type'];

export function estimateTokens(chars: number): number {
  return Math.ceil(chars / 4);
}
