import { describe, expect, it } from 'vitest';
import { linksIn, looksLikeHtml } from '../../../src/media/links.js';
import { readablePage } from '../../../src/media/read-page.js';

describe('links in a message', () => {
  it('finds distinct http(s) URLs without sentence punctuation, at most 3', () => {
    expect(linksIn('see https://a.example/x, and (http://b.example/y). ftp://c.example https://a.example/x')).toEqual([
      'https://a.example/x',
      'http://b.example/y',
    ]);
    expect(linksIn('https://en.wikipedia.org/wiki/Teal_(disambiguation)!')).toEqual(['https://en.wikipedia.org/wiki/Teal_(disambiguation)']);
    expect(linksIn('http://1.example http://2.example http://3.example http://4.example')).toHaveLength(3);
    expect(linksIn('no links here')).toEqual([]);
  });

  it('reads a page as lines of text without scripts, and tells HTML from plain text', () => {
    const page = readablePage('<html><head><title>T</title><style>.x{}</style></head><body><p>one</p><p>two<br>three</p><script>bad()</script></body></html>');
    expect(page.title).toBe('T');
    expect(page.text).toBe('one\ntwo\nthree');
    expect(looksLikeHtml('<!DOCTYPE html><html>')).toBe(true);
    expect(looksLikeHtml('a < b and c > d')).toBe(false);
  });
});
