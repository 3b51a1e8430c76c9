import { mapProse } from '../../src/util/chunk.js';

/**
 * Model Markdown → WhatsApp's own formatting: `*bold*`, `_italic_`, `~strike~`, ``` blocks
 * and `inline code` (kept as written), headings as bold lines, links as "text (url)".
 * WhatsApp has no language tag on a code block, so it is dropped from the opening fence.
 */
function prose(s: string, lineStart: boolean): string {
  let t = s;
  if (lineStart) t = t.replace(/^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$/, '\u0001$1\u0001');
  t = t
    .replace(/\[([^\]\n]+)\]\((https?:\/\/[^\s)]+)\)/g, (_m, text: string, url: string) => (text === url ? url : `${text} (${url})`))
    .replace(/\*\*(?!\s)([^*\n]+?)\*\*/g, '\u0001$1\u0001')
    .replace(/__(?!\s)([^_\n]+?)__/g, '\u0001$1\u0001')
    .replace(/(^|[^*\w])\*(?!\s)([^*\n]+?)\*(?![*\w])/g, '$1_$2_')
    .replace(/~~(?!\s)([^~\n]+?)~~/g, '~$1~');
  // biome-ignore lint/suspicious/noControlCharactersInRegex: \u0001 is the placeholder set above for bold and headings (no chat text holds it), so the italics pass leaves them alone
  return t.replace(/\u0001/g, '*');
}

export function markdownToWhatsApp(md: string): string {
  return mapProse(md, prose)
    .split('\n')
    .map((line) => line.replace(/^ {0,3}(`{3,}|~{3,})[\w+#.-]*\s*$/, '```'))
    .join('\n');
}
