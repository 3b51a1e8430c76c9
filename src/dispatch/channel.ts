import type { ChannelAdapter } from '../contracts/channel.js';
import type { ChannelConfig } from '../config/schema.js';

/** A running channel as dispatch sees it: its config section and its adapter. */
export interface DispatchChannel {
  config: ChannelConfig;
  adapter: ChannelAdapter;
}
