import { Readability } from '@mozilla/readability';
import { parseHTML } from 'linkedom';

/** Block elements whose end is a line break in the text (Readability's textContent runs paragraphs together). */
const BLOCK_END = /<\/(p|div|h[1-6]|li|tr|blockquote|pre|section|article|header|footer|ul|ol|table)>|<br\s*\/?>/gi;

function textOf(html: string): string {
  const { document } = parseHTML(`<!doctype html><html><body>${html.replace(BLOCK_END, '$&\n')}</body></html>`);
  for (const el of document.querySelectorAll('script, style, noscript, template')) el.remove();
  return (document.body?.textContent ?? '')
    .replace(/[ \t\f\v\r]+/g, ' ')
    .replace(/ *\n */g, '\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

/**
 * A web page's readable text: Mozilla's Readability (Firefox's reader view) picks the
 * article out of navigation and footers; a page it finds no article in gives its whole
 * body's text, without scripts and styles.
 */
export function readablePage(html: string): { title: string | undefined; text: string } {
  const { document } = parseHTML(html);
  const title = document.title?.trim() || undefined;
  let article: ReturnType<Readability['parse']> = null;
  try {
    article = new Readability(document, { charThreshold: 0 }).parse();
  } catch {
    // A page Readability cannot walk is read whole below.
  }
  if (article?.content) return { title: article.title?.trim() || title, text: textOf(article.content) };
  return { title, text: textOf(document.body?.innerHTML ?? html) };
}
