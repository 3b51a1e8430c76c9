import type { ChannelConfig, ChannelKind } from '../config/schema.js';
import type { ChannelFactory } from '../contracts/channel.js';

/**
 * The one place `src/` meets `channels/`. Each kind is imported lazily, so a daemon without
 * Discord never pays for loading discord.js (about 1 s of CPU and tens of MB per SDK).
 */
export const channelKinds: Record<ChannelKind, (() => Promise<ChannelFactory<ChannelConfig>>) | undefined> = {
  webchat: async () => (await import('../../channels/webchat/index.js')).createChannel,
  telegram: async () => (await import('../../channels/telegram/index.js')).createChannel,
  discord: async () => (await import('../../channels/discord/index.js')).createChannel,
  slack: async () => (await import('../../channels/slack/index.js')).createChannel,
};

export async function loadChannelFactory(kind: ChannelKind): Promise<ChannelFactory<ChannelConfig>> {
  const load = channelKinds[kind];
  if (!load) throw new Error(`channel type "${kind}" is not available in this build of channeld yet`);
  return load();
}
