/**
 * Slack reads `<…>` as a control sequence: user and channel mentions (`<@U123>`, `<#C123>`),
 * broadcasts (`<!channel>`, `<!here>`, `<!everyone>`, `<!subteam^…>`) and links. Model
 * output must never ping anyone, so every text channeld sends to Slack goes through this
 * (or through `markdownToMrkdwn`, which escapes `&`, `<` and `>` itself).
 *
 * Every `<` becomes `&lt;`, which Slack shows as `<`: no sequence can form. The escape is
 * per character, so the escaped form of a growing text keeps growing; a native stream,
 * which sends only the new part, can escape the whole text and send the difference.
 */
export function neutralizeSlackMentions(text: string): string {
  return text.replace(/</g, '&lt;');
}
