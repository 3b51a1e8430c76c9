import { mapProse } from '../../src/util/chunk.js';

/**
 * Model Markdown for Slack's `markdown_text` (standard Markdown, rendered by Slack). Outside
 * code, `&`, `<` and `>` become entities, so model output cannot form Slack mentions or
 * links like `<!channel>` or `<@U123>`, and a word joiner after "@" keeps `@here`,
 * `@channel` and `@everyone` from notifying anyone. Code is kept as written: Slack reads
 * no mentions there.
 */
function escapeProse(s: string): string {
  return s
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/@(here|channel|everyone)\b/gi, '@\u2060$1');
}

export function markdownForSlack(md: string): string {
  return mapProse(md, (prose, lineStart) => {
    // A ">" that starts a quote stays Markdown; elsewhere it is escaped with the rest.
    const quote = lineStart ? (/^(\s*>)+\s?/.exec(prose)?.[0] ?? '') : '';
    return quote + escapeProse(prose.slice(quote.length));
  });
}

/** Slack errors that mean "this workspace or server does not take markdown_text": the mrkdwn path takes over. */
export const MARKDOWN_REFUSALS = new Set(['no_text', 'invalid_arguments', 'invalid_blocks', 'markdown_text_not_supported', 'invalid_markdown_text']);
