import MarkdownIt from 'markdown-it';

/**
 * Model Markdown for a platform that renders only part of it (an HTML subset, a markup of
 * its own, Markdown without tables): the blocks it does not render are rewritten, in Markdown still, so the
 * platform's own formatter can take the result as before. markdown-it finds the blocks (so
 * a `#` or `|` inside code, or a list marker that is not one, is left alone); lines outside
 * those blocks are kept byte for byte. The result is again valid input: flattening twice
 * changes nothing.
 */
export interface FlattenOptions {
  /** `## Title` (and setext headings) become a bold line, `**Title**`. */
  headings?: boolean;
  /** `-`, `*` and `+` list markers become `•`; numbered items are kept as they are. */
  lists?: boolean;
  /** Tables become a fenced code block: columns aligned, or one record per row when too wide. */
  tables?: boolean;
  /** The widest table kept as a grid (characters per line); wider ones go one record per row. */
  tableWidth?: number;
}

/** A phone shows about this many monospace characters on a line. */
export const DEFAULT_TABLE_WIDTH = 48;

const parser = new MarkdownIt('commonmark').enable('table').enable('strikethrough');

type Token = ReturnType<typeof parser.parse>[number];

/** A cell's text without its Markdown: the text of its inline tokens. */
function plain(inline: Token): string {
  const parts: string[] = [];
  for (const c of inline.children ?? []) {
    if (c.type === 'text' || c.type === 'code_inline') parts.push(c.content);
    else if (c.type === 'softbreak' || c.type === 'hardbreak') parts.push(' ');
    else if (c.type === 'image') parts.push(c.content);
  }
  return parts.join('').trim();
}

/** One table's rows of plain cells, from its tokens (`from` at table_open). */
function tableRows(tokens: Token[], from: number): { rows: string[][]; end: number } {
  const rows: string[][] = [];
  let i = from + 1;
  for (; i < tokens.length && tokens[i]!.type !== 'table_close'; i++) {
    const t = tokens[i]!;
    if (t.type === 'tr_open') rows.push([]);
    else if (t.type === 'inline') rows.at(-1)?.push(plain(t));
  }
  return { rows, end: i };
}

/** Characters a monospace font gives a cell (code points; wide scripts are rare in tables). */
const width = (s: string) => [...s].length;
const pad = (s: string, n: number) => s + ' '.repeat(Math.max(0, n - width(s)));

/** A table as the lines of a code block: an aligned grid, or "header: value" records when the grid is wider than `max`. */
export function tableLines(rows: string[][], max = DEFAULT_TABLE_WIDTH): string[] {
  const columns = Math.max(0, ...rows.map((r) => r.length));
  const widths = Array.from({ length: columns }, (_, c) => Math.max(1, ...rows.map((r) => width(r[c] ?? ''))));
  const gridWidth = widths.reduce((a, b) => a + b, 0) + 3 * Math.max(0, columns - 1);
  if (gridWidth <= max || columns <= 1) {
    const line = (r: string[]) =>
      widths
        .map((w, c) => pad(r[c] ?? '', w))
        .join(' | ')
        .trimEnd();
    const [head, ...body] = rows;
    return head ? [line(head), widths.map((w) => '-'.repeat(w)).join('-+-'), ...body.map(line)] : [];
  }
  const [head = [], ...body] = rows;
  const out: string[] = [];
  for (const r of body) {
    if (out.length) out.push('');
    out.push(...r.map((cell, c) => (head[c] ? `${head[c]}: ${cell}` : cell)));
  }
  return out;
}

/** The heading's text without its `#`s, closing `#`s or setext underline; emphasis markers dropped (the line is bold already). */
function headingText(inline: Token): string {
  return inline.content.replace(/\*\*|__/g, '').trim();
}

/** The quote markers a block's first line starts with, as the prefix for the lines that replace it (`> `, or nothing). */
function quotePrefix(line: string): string {
  const q = /^(?:[ \t]*>)*/.exec(line)![0].replace(/[ \t]+/g, '');
  return q ? `${q.split('').join(' ')} ` : '';
}

export function flattenMarkdown(md: string, o: FlattenOptions): string {
  if (!o.headings && !o.lists && !o.tables) return md;
  // Cheap exit for the common reply: nothing that could be one of these blocks.
  if (!/^[ \t>]*(#|[-*+]([ \t]|$)|\||[-:| \t]*-[-:| \t]*$|=+[ \t]*$)/m.test(md)) return md;
  const lines = md.split('\n');
  const tokens = parser.parse(md, {});
  /** Replacements by first line: the lines they stand for, and what goes there instead. */
  const edits = new Map<number, { count: number; lines: string[] }>();
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (!t.map) continue;
    const [start, end] = t.map;
    if (o.headings && t.type === 'heading_open') {
      const text = headingText(tokens[i + 1]!);
      edits.set(start, { count: end - start, lines: text ? [`${quotePrefix(lines[start]!)}**${text}**`] : [] });
    } else if (o.lists && t.type === 'list_item_open' && /^[-*+]$/.test(t.markup) && !edits.has(start)) {
      const line = lines[start]!;
      const m = /^((?:[ \t]*>)*[ \t]*)[-*+](?=[ \t]|$)/.exec(line);
      if (m) edits.set(start, { count: 1, lines: [`${m[1]}•${line.slice(m[0].length)}`] });
    } else if (o.tables && t.type === 'table_open') {
      const { rows, end: close } = tableRows(tokens, i);
      const q = quotePrefix(lines[start]!);
      edits.set(start, { count: end - start, lines: [`${q}\`\`\``, ...tableLines(rows, o.tableWidth).map((l) => q + l), `${q}\`\`\``] });
      i = close;
    }
  }
  if (edits.size === 0) return md;
  const out: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const e = edits.get(i);
    if (!e) {
      out.push(lines[i]!);
      continue;
    }
    out.push(...e.lines);
    i += e.count - 1;
  }
  return out.join('\n');
}
