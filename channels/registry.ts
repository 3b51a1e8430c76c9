import type { ChannelDescriptor } from '../src/contracts/channel.js';
import { discord } from './discord/index.js';
import { irc } from './irc/index.js';
import { slack } from './slack/index.js';
import { telegram } from './telegram/index.js';
import { webchat } from './webchat/index.js';
import { xmpp } from './xmpp/index.js';

/**
 * The channel kinds channeld ships, one line each; the entry point (bin/channeld.ts) hands
 * this list to the CLI. A new kind is its folder plus one line here (docs/EXTENDING.md).
 * The order is the order `--help` and "is not one of ..." list them in.
 */
export const builtinKinds: readonly ChannelDescriptor[] = [webchat, telegram, discord, slack, irc, xmpp];
