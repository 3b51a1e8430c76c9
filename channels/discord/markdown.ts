import { flattenMarkdown } from '../../src/util/markdown-blocks.js';

/**
 * Model Markdown for Discord: Discord renders headings, lists, quotes and code itself, but
 * not tables, so a table goes as a code block with its columns aligned (one record per row
 * when too wide for a phone). Everything else is sent as written.
 */
export function markdownForDiscord(md: string): string {
  return flattenMarkdown(md, { tables: true });
}
