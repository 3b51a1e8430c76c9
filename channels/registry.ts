import type { ChannelDescriptor } from '../src/contracts/channel.js';
import { discord } from './discord/index.js';
import { irc } from './irc/index.js';
import { matrix } from './matrix/index.js';
import { mattermost } from './mattermost/index.js';
import { slack } from './slack/index.js';
import { teams } from './teams/index.js';
import { telegram } from './telegram/index.js';
import { webchat } from './webchat/index.js';
import { whatsapp } from './whatsapp/index.js';
import { xmpp } from './xmpp/index.js';

/**
 * The channel kinds channeld ships, one line each; the entry point (bin/channeld.ts) hands
 * this list to the CLI. A new kind is its folder plus one line here (docs/EXTENDING.md).
 * The order is the order `--help` and "is not one of ..." list them in.
 */
// biome-ignore format: one kind per line, so kinds added side by side merge without a conflict
export const builtinKinds: readonly ChannelDescriptor[] = [
  webchat,
  telegram,
  discord,
  slack,
  whatsapp,
  mattermost,
  matrix,
  teams,
  irc,
  xmpp,
];
