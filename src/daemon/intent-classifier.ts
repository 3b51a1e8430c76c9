import { judgeIntent } from '../agent/intent.js';
import { agentOf } from '../config/load.js';
import type { ChannelMessage } from '../contracts/message.js';
import type { DispatcherOptions, IntentDecision } from '../dispatch/options.js';
import type { Logger } from '../observe/logger.js';
import type { Metrics } from '../observe/metrics.js';
import type { LiveConfig } from './config-service.js';
import type { ChannelTable } from './services.js';

/** The classifier is a short call; past this the message is ignored. */
const INTENT_TIMEOUT_MS = 10_000;

/**
 * reply_intent = "classifier": the channel's `intent_model` (else its agent's model) judges
 * whether an unaddressed group message is for the bot. "ignore" when the agent has no
 * OpenAI-compatible endpoint or model, or on any failure; every call is counted.
 */
export function intentClassifier(config: LiveConfig, channels: ChannelTable, metrics: Metrics, log: Logger): NonNullable<DispatcherOptions['classify']> {
  return async (msg: ChannelMessage, recent: readonly ChannelMessage[], signal: AbortSignal): Promise<IntentDecision> => {
    const c = config.config;
    const name = agentOf(c, msg.channelId);
    const agent = c.agents[name];
    const model = c.channels.find((x) => x.id === msg.channelId)?.intent_model ?? agent?.model;
    if (!agent?.base_url || !model) return 'ignore';
    const apiKey = config.secrets.get(`agents.${name}`, 'api_key');
    const lines = recent.map((m) => ({ name: m.sender.name, text: m.text }));
    const v = await judgeIntent(
      { baseUrl: agent.base_url, model, timeoutMs: INTENT_TIMEOUT_MS, ...(apiKey ? { apiKey } : {}) },
      channels.get(msg.channelId)?.adapter.selfName,
      lines,
      signal,
    );
    metrics.intentCalls.inc({ channel: msg.channelId, decision: v.error ? 'failed' : v.decision });
    metrics.intentLatency.observe({ channel: msg.channelId }, v.latencyMs / 1000);
    metrics.intentTokens.inc({ channel: msg.channelId, kind: 'input' }, v.inputTokens);
    metrics.intentTokens.inc({ channel: msg.channelId, kind: 'output' }, v.outputTokens);
    if (v.error) log.warn({ err: v.error, channel: msg.channelId, model }, 'the intent classifier failed; the message is ignored');
    return v.decision;
  };
}
