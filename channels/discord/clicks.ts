import { type ButtonInteraction, InteractionResponseType, MessageFlags, type REST, Routes } from 'discord.js';
import type { Logger } from 'pino';
import type { ChannelMessage } from '../../src/contracts/message.js';
import type { PlatformCall } from '../../src/util/platform-call.js';

/** What only the clicking user sees when their click was not stored: nothing else tells them. */
export const CLICK_NOT_KEPT = 'Sorry, this click could not be kept. Please click the button again in a few minutes.';

export interface ClickContext {
  rest: REST;
  call: PlatformCall;
  log: Logger;
  channel: string;
  /** The listener's signal: a stopped channel answers nothing more. */
  signal: AbortSignal;
}

/**
 * A button click: acknowledged at once with DEFERRED_UPDATE_MESSAGE (type 6: the message stays
 * as it is), then stored. The acknowledgement is no delivery receipt: Discord voids the
 * interaction's token unless its first answer comes within 3 s (the user sees "This
 * interaction failed") and never sends an interaction again, so waiting for the store (held
 * for minutes while storage is degraded) would only lose the answer. A click the store did
 * not keep is told to its user alone, by an ephemeral follow-up on the interaction's token
 * (POST /webhooks/{application}/{token}, flags 64), which Discord takes for 15 minutes once
 * the interaction was answered.
 */
export function takeClick(i: ButtonInteraction, click: ChannelMessage, deliver: (m: ChannelMessage) => Promise<boolean>, c: ClickContext): void {
  const acked = c
    .call('interactionCallback', c.signal, (s) =>
      c.rest.post(Routes.interactionCallback(i.id, i.token), { body: { type: InteractionResponseType.DeferredMessageUpdate }, auth: false, signal: s }),
    )
    .catch((err: unknown) => c.log.warn({ err, channel: c.channel }, 'Discord interaction not acknowledged'));
  deliver(click).catch(async (err: unknown) => {
    c.log.warn({ err, channel: c.channel, messageId: click.messageId }, 'Discord button click not stored; its user is asked to click again');
    // A follow-up needs the first answer in place: Discord knows the token's webhook only then.
    await acked;
    await c
      .call('interactionFollowUp', c.signal, (s) =>
        c.rest.post(Routes.webhook(i.applicationId, i.token), {
          body: { content: CLICK_NOT_KEPT, flags: MessageFlags.Ephemeral, allowed_mentions: { parse: [] } },
          auth: false,
          signal: s,
        }),
      )
      .catch((e: unknown) => c.log.warn({ err: e, channel: c.channel }, 'Discord click follow-up not sent'));
  });
}
