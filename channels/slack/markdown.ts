/**
 * Model Markdown for Slack's `markdown_text` (standard Markdown, rendered by Slack). Outside
 * code, `&`, `<` and `>` become entities, so model output cannot form Slack mentions or
 * links like `<!channel>` or `<@U123>`, and a word joiner after "@" keeps `@here`,
 * `@channel` and `@everyone` from notifying anyone. Code is kept as written: Slack reads
 * no mentions there.
 */
const fence = /^ {0,3}(`{3,}|~{3,})/;

function escapeProse(s: string): string {
  return s
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/@(here|channel|everyone)\b/gi, '@\u2060$1');
}

export function markdownForSlack(md: string): string {
  const out: string[] = [];
  let inCode: string | undefined;
  for (const line of md.split('\n')) {
    const f = fence.exec(line);
    if (inCode !== undefined) {
      if (f && f[1]![0] === inCode[0] && f[1]!.length >= inCode.length) inCode = undefined;
      out.push(line);
      continue;
    }
    if (f) {
      inCode = f[1]!;
      out.push(line);
      continue;
    }
    // A ">" that starts a quote stays Markdown; elsewhere it is escaped with the rest.
    const quote = /^(\s*>)+\s?/.exec(line)?.[0] ?? '';
    const rest = line.slice(quote.length);
    out.push(quote + rest.split(/(`[^`\n]+`)/g).map((part, i) => (i % 2 === 1 ? part : escapeProse(part))).join(''));
  }
  return out.join('\n');
}

/** Slack errors that mean "this workspace or server does not take markdown_text": the mrkdwn path takes over. */
export const MARKDOWN_REFUSALS = new Set(['no_text', 'invalid_arguments', 'invalid_blocks', 'markdown_text_not_supported', 'invalid_markdown_text']);
