import type { TurnContext } from './turn.js';

/** The phases of a turn, in the order the runtime runs them. */
export const phases = ['pre_dispatch', 'post_dispatch', 'pre_agent_build', 'post_agent_build', 'pre_execute', 'post_response', 'on_error', 'finally'] as const;
export type Phase = (typeof phases)[number];

/** What a hook tells the runtime to do next. */
export type HookResult = { kind: 'continue' } | { kind: 'short_circuit'; reply: string } | { kind: 'skip_agent' };
export const HookResult = {
  continue: { kind: 'continue' } as HookResult,
  skipAgent: { kind: 'skip_agent' } as HookResult,
  shortCircuit: (reply: string): HookResult => ({ kind: 'short_circuit', reply }),
};

export interface Hook {
  phase: Phase;
  name: string;
  /** Lower runs first among hooks not ordered by before/after. Default 100. */
  priority?: number;
  /** Names of hooks (same phase) this one must run before / after. */
  before?: string[];
  after?: string[];
  /** Runs only while this mode is active in the conversation. */
  mode?: string;
  // biome-ignore lint/suspicious/noConfusingVoidType: a hook that only observes returns nothing (`async () => {}` is Promise<void>), which means continue
  run(ctx: TurnContext): HookResult | void | Promise<HookResult | void>;
}
