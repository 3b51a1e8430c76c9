import { chunkText, mapProse } from '../../src/util/chunk.js';

/**
 * Telegram rich messages (Bot API `sendRichMessage`, `rich_message.markdown`): model
 * Markdown goes as it is, and Telegram renders headings, lists, tables, quotes and code.
 * Their limits, from the Bot API: 32,768 characters, 500 blocks (nested ones, list items,
 * table rows and quotes included), 16 levels of nesting.
 */
export const RICH_MAX_CHARS = 32_768;
export const RICH_MAX_BLOCKS = 500;
export const RICH_MAX_DEPTH = 16;
/** The classic text message limit, for the HTML path. */
export const TEXT_MAX_CHARS = 4096;

const fence = /^ {0,3}(`{3,}|~{3,})/;

/**
 * An upper bound on the blocks Telegram will count: every non-blank line outside code is
 * taken as its own block (a paragraph of several lines counts more than once), a code block
 * as one. Overcounting only makes chunks smaller, never refused.
 */
export function richBlocks(md: string): number {
  let blocks = 0;
  let inCode: string | undefined;
  for (const line of md.split('\n')) {
    const f = fence.exec(line);
    if (inCode !== undefined) {
      if (f && f[1]![0] === inCode[0] && f[1]!.length >= inCode.length) inCode = undefined;
      continue;
    }
    if (f) {
      inCode = f[1]!;
      blocks++;
    } else if (line.trim() !== '') blocks++;
  }
  return blocks;
}

/** The deepest nesting of quotes and indented list items outside code, plus one for the top level. */
export function richDepth(md: string): number {
  let depth = 1;
  let inCode = false;
  for (const line of md.split('\n')) {
    if (fence.test(line)) inCode = !inCode;
    if (inCode) continue;
    const quotes = /^(\s*>)*/.exec(line)![0].replace(/[^>]/g, '').length;
    const indent = /^\s*/.exec(line.replace(/^(\s*>)*/, ''))![0].replace(/\t/g, '    ').length;
    const listLevel = /^\s*([-*+]|\d+[.)])\s/.test(line.replace(/^(\s*>)*/, '')) ? Math.floor(indent / 2) + 1 : 0;
    depth = Math.max(depth, 1 + quotes + listLevel);
  }
  return depth;
}

/** Whether one rich message can hold `md` (as `toRichMarkdown` will write it). */
export function richFits(md: string): boolean {
  return md.length <= RICH_MAX_CHARS && toRichMarkdown(md).length <= RICH_MAX_CHARS && richDepth(md) <= RICH_MAX_DEPTH && richBlocks(md) <= RICH_MAX_BLOCKS;
}

/**
 * Splits a reply into rich messages: at the character limit, smaller where a piece has too
 * many blocks; a piece nested deeper than rich messages allow goes the HTML way, so it is
 * cut at the text message limit. Code fences are closed and reopened as in `chunkText`.
 */
export function chunkRich(md: string): string[] {
  const out: string[] = [];
  const place = (piece: string, max: number) => {
    if (richFits(piece) || piece.length <= 1) return void out.push(piece);
    if (richDepth(piece) > RICH_MAX_DEPTH && max <= TEXT_MAX_CHARS) return void out.push(...chunkText(piece, TEXT_MAX_CHARS));
    const smaller = richDepth(piece) > RICH_MAX_DEPTH ? TEXT_MAX_CHARS : Math.max(1, Math.floor(Math.min(max, piece.length) / 2));
    for (const p of chunkText(piece, smaller)) place(p, smaller);
  };
  for (const piece of chunkText(md, RICH_MAX_CHARS)) place(piece, RICH_MAX_CHARS);
  return out;
}

/**
 * Model Markdown as rich Markdown: rich Markdown also reads HTML tags, so a `<` outside code
 * is written as an entity and model output cannot form markup (as on the HTML path).
 */
export function toRichMarkdown(md: string): string {
  return mapProse(md, (prose) => prose.replace(/</g, '&lt;'));
}
