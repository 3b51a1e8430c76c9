import type { Button } from '../../src/contracts/channel.js';
import { SUBMIT_KEY } from './normalize.js';

/**
 * Approval buttons as an Adaptive Card: each an Action.Submit whose `data` comes back as the
 * clicker's message activity (`value`), which normalize reads as the command.
 */
export function buttonsCard(buttons: readonly Button[]) {
  return {
    contentType: 'application/vnd.microsoft.card.adaptive',
    content: {
      type: 'AdaptiveCard',
      $schema: 'http://adaptivecards.io/schemas/adaptive-card.json',
      version: '1.4',
      body: [],
      actions: buttons.map((b) => ({
        type: 'Action.Submit',
        title: b.label,
        style: b.style === 'danger' ? 'destructive' : b.style === 'primary' ? 'positive' : 'default',
        data: { [SUBMIT_KEY]: b.data },
      })),
    },
  };
}

/**
 * Teams turns `<at>Name</at>` into a mention only with a mention entity, which the bot never
 * sends; the tag is still written as text, so no answer can look like (or become) a mention
 * of everyone.
 */
export function neutraliseMentions(text: string): string {
  return text.replace(/<(\/?)at(?=[\s>])/gi, '&lt;$1at');
}
