import type { ChannelDescriptor } from '../src/contracts/channel.js';
import { discord } from './discord/index.js';
// biome-ignore format: one kind per line, so kinds added side by side merge without a conflict
export const builtinKinds: readonly ChannelDescriptor[] = [
  webchat,
  telegram,
  discord,
  slack,
  whatsapp,
  matrix,
  irc,
];
