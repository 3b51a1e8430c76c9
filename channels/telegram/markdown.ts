import { flattenMarkdown } from '../../src/util/markdown-blocks.js';

/**
 * Model output is Markdown; Telegram accepts a small HTML subset. This renders fenced code
 * (with its language), inline code, bold, italic, strikethrough and links, and escapes
 * everything else, so no model output can produce markup Telegram refuses. An unclosed
 * fence (a draft mid-block) renders as code up to the end. Headings, lists and tables,
 * which Telegram HTML has no tags for, are first rewritten by `forTelegramHtml`.
 */
export function escapeHtml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** Bold, italic and strikethrough on already escaped text. */
function emphasis(s: string): string {
  s = s.replace(/\*\*([^*\n]+)\*\*/g, '<b>$1</b>').replace(/__([^_\n]+)__/g, '<b>$1</b>');
  s = s.replace(/(^|[^*\w])\*([^*\n]+)\*(?!\w)/g, '$1<i>$2</i>').replace(/(^|[^_\w])_([^_\n]+)_(?!\w)/g, '$1<i>$2</i>');
  return s.replace(/~~([^~\n]+)~~/g, '<s>$1</s>');
}

function inline(text: string): string {
  const held: string[] = [];
  const hold = (html: string) => `\u0000${held.push(html) - 1}\u0000`;
  // A NUL of the text's own is dropped (it renders as nothing), so the text cannot spell a
  // placeholder that was never held. Then inline code, so nothing inside it is read as formatting.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the NUL is what is removed
  let s = text.replace(/\u0000/g, '').replace(/`([^`\n]+)`/g, (_m, c: string) => hold(`<code>${escapeHtml(c)}</code>`));
  // Links next: the URL is written verbatim (escaped), never through the emphasis rules
  // (`_b_` or `**` in a URL would otherwise open tags inside the attribute), and the link
  // text is formatted on its own, so its tags always close inside the link.
  s = s.replace(/\[([^\]\n]+)\]\((https?:\/\/[^\s)]+)\)/g, (_m, t: string, u: string) =>
    hold(`<a href="${escapeHtml(u).replace(/"/g, '&quot;')}">${emphasis(escapeHtml(t))}</a>`),
  );
  s = emphasis(escapeHtml(s));
  // Held pieces may hold others (code inside a link text).
  // biome-ignore lint/suspicious/noControlCharactersInRegex: \u0000 delimits held pieces; no chat text contains it
  while (/\u0000\d+\u0000/.test(s)) s = s.replace(/\u0000(\d+)\u0000/g, (_m, i: string) => held[Number(i)]!);
  return s;
}

/**
 * The Markdown the HTML path renders: headings as bold lines, bullets as •, tables as a
 * monospace block. Replies are split on this text, so every piece fits a message as sent.
 */
export function forTelegramHtml(md: string): string {
  return flattenMarkdown(md, { headings: true, lists: true, tables: true });
}

/** What the rendering below acts on: characters to escape, emphasis, code, links, fences, a NUL. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: a NUL goes the long way, which drops it
const MARKUP = /[&<>*_~`[\u0000]/;

export function markdownToTelegramHtml(md: string): string {
  const flat = forTelegramHtml(md);
  // Most chat text is plain prose, and every draft edit renders the whole answer again: text
  // with none of those characters is its own HTML, with no split, regex pass or copy.
  if (!MARKUP.test(flat)) return flat;
  const out: string[] = [];
  const lines = flat.split('\n');
  let prose: string[] = [];
  const flush = () => {
    if (prose.length) out.push(inline(prose.join('\n')));
    prose = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const open = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)\s*$/.exec(lines[i]!);
    if (!open) {
      prose.push(lines[i]!);
      continue;
    }
    flush();
    const code: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const close = /^ {0,3}(`{3,}|~{3,})\s*$/.exec(lines[j]!);
      if (close && close[1]![0] === open[1]![0] && close[1]!.length >= open[1]!.length) break;
      code.push(lines[j]!);
    }
    const lang = open[2] ? ` class="language-${escapeHtml(open[2])}"` : '';
    out.push(`<pre><code${lang}>${escapeHtml(code.join('\n'))}</code></pre>`);
    i = j;
  }
  flush();
  return out.join('\n');
}
