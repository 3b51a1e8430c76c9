import { flattenMarkdown } from '../../src/util/markdown-blocks.js';

/**
 * Model Markdown → Slack mrkdwn: *bold*, _italic_, ~strike~, <url|text> links, code kept,
 * and &, <, > escaped so model output cannot form mentions like <!channel>. mrkdwn has no
 * headings, lists or tables: headings become bold lines, bullets •, tables a code block.
 */
export function markdownToMrkdwn(md: string): string {
  const parts = flattenMarkdown(md, { headings: true, lists: true, tables: true }).split(/(```[\s\S]*?(?:```|$)|`[^`\n]+`)/g);
  return parts
    .map((part, i) => {
      const escaped = part.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
      if (i % 2 === 1) return escaped.replace(/^```[\w+#.-]*\n/, '```\n'); // code: Slack has no language tag
      return (
        escaped
          .replace(/^#{1,6}\s+(.+)$/gm, '\u0001$1\u0001')
          .replace(/\[([^\]\n]+)\]\((https?:\/\/[^\s)]+)\)/g, '<$2|$1>')
          .replace(/\*\*([^*\n]+)\*\*/g, '\u0001$1\u0001')
          .replace(/(^|[^*\w])\*([^*\n]+)\*(?!\w)/g, '$1_$2_')
          // biome-ignore lint/suspicious/noControlCharactersInRegex: \u0001 is the placeholder set above for headings and bold (no chat text holds it), so they survive the italics pass
          .replace(/\u0001/g, '*')
          .replace(/~~([^~\n]+)~~/g, '~$1~')
      );
    })
    .join('');
}
