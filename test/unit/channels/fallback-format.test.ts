import { describe, expect, it } from 'vitest';
import { markdownForDiscord } from '../../../channels/discord/markdown.js';
import { markdownToMrkdwn } from '../../../channels/slack/mrkdwn.js';
import { forTelegramHtml, markdownToTelegramHtml } from '../../../channels/telegram/markdown.js';
import { TEXT_MAX_CHARS } from '../../../channels/telegram/rich.js';
import { chunkText } from '../../../src/util/chunk.js';
import { DEFAULT_TABLE_WIDTH, flattenMarkdown, tableLines } from '../../../src/util/markdown-blocks.js';

/** A code block: nothing inside it is a heading, a list or a table. */
const CODE = ['```md', '# not a heading', '- not a bullet', '| not | a table |', '```'];

const ANSWER = [
  '## Plan for **today**',
  '',
  'Some text with a - dash, a # hash and a | pipe.',
  '',
  '- apples',
  '- pears',
  '  * small ones',
  '1. first',
  '2. second',
  '',
  '| Fruit | Qty |',
  '|-------|----:|',
  '| **apple** | 3 |',
  '| pear | 10 |',
  '',
  ...CODE,
].join('\n');

const GRID = ['Fruit | Qty', '------+----', 'apple | 3', 'pear  | 10'];

describe('Markdown the platform does not render, flattened', () => {
  it('headings bold, bullets •, numbers kept, tables an aligned grid; code and prose untouched', () => {
    expect(flattenMarkdown(ANSWER, { headings: true, lists: true, tables: true }).split('\n')).toEqual([
      '**Plan for today**',
      '',
      'Some text with a - dash, a # hash and a | pipe.',
      '',
      '• apples',
      '• pears',
      '  • small ones',
      '1. first',
      '2. second',
      '',
      '```',
      ...GRID,
      '```',
      '',
      ...CODE,
    ]);
  });

  it('is idempotent, and leaves text without such blocks as it is', () => {
    const all = { headings: true, lists: true, tables: true };
    const once = flattenMarkdown(ANSWER, all);
    expect(flattenMarkdown(once, all)).toBe(once);
    expect(flattenMarkdown('just *a* reply\nover two lines', all)).toBe('just *a* reply\nover two lines');
  });

  it('setext headings, and blocks inside quotes, keep their place', () => {
    expect(flattenMarkdown('Title\n=====\n\n> ## Quoted\n> - item', { headings: true, lists: true })).toBe('**Title**\n\n> **Quoted**\n> • item');
  });

  it('a table wider than a phone goes one record per row', () => {
    const wide = [
      ['Name', 'Description'],
      ['alpha', 'x'.repeat(DEFAULT_TABLE_WIDTH)],
      ['beta', 'short'],
    ];
    expect(tableLines(wide)).toEqual(['Name: alpha', `Description: ${'x'.repeat(DEFAULT_TABLE_WIDTH)}`, '', 'Name: beta', 'Description: short']);
  });
});

describe('Telegram HTML (rich messages off or refused)', () => {
  it('headings bold, lists with bullets, a table in <pre>', () => {
    const html = markdownToTelegramHtml(ANSWER);
    expect(html).toContain('<b>Plan for today</b>');
    expect(html).toContain('• apples\n• pears\n  • small ones\n1. first');
    expect(html).toContain(`<pre><code>${GRID.join('\n')}</code></pre>`);
    expect(html).not.toContain('## ');
    expect(html).not.toContain('|---');
  });

  it('a long table is split on the text as sent: every piece fits one message, fences balanced', () => {
    const rows = Array.from({ length: 400 }, (_, i) => `| item ${i} | ${i * 7} | note ${i % 13} |`);
    const md = ['| Item | Value | Note |', '|---|---|---|', ...rows].join('\n');
    const pieces = chunkText(forTelegramHtml(md), TEXT_MAX_CHARS);
    expect(pieces.length).toBeGreaterThan(1);
    for (const p of pieces) {
      expect(p.length).toBeLessThanOrEqual(TEXT_MAX_CHARS);
      const html = markdownToTelegramHtml(p);
      expect(html.split('<pre>').length).toBe(html.split('</pre>').length);
    }
  });
});

describe('Slack mrkdwn (markdown_text refused)', () => {
  it('headings bold, bullets •, a table in a code block', () => {
    const out = markdownToMrkdwn(ANSWER);
    expect(out).toContain('*Plan for today*');
    expect(out).toContain('• apples\n• pears\n  • small ones\n1. first');
    expect(out).toContain(['```', ...GRID, '```'].join('\n'));
  });
});

describe('Discord markdown', () => {
  it('headings and lists stay for Discord to render; a table becomes a code block', () => {
    const out = markdownForDiscord(ANSWER);
    expect(out).toContain('## Plan for **today**');
    expect(out).toContain('- apples\n- pears');
    expect(out).toContain(['```', ...GRID, '```'].join('\n'));
  });
});
