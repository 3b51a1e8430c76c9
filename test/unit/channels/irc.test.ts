import { describe, expect, it } from 'vitest';
import { TokenBucket } from '../../../channels/irc/bucket.js';
import { alternateNicks } from '../../../channels/irc/connection.js';
import { normalizePrivmsg, senderId } from '../../../channels/irc/normalize.js';
import { formatLine, maskMatches, parseLine } from '../../../channels/irc/protocol.js';
import { ircLines, markdownToPlainLines, wrapLine } from '../../../channels/irc/text.js';
import { parseConfig } from '../../../src/config/load.js';
import { kinds } from '../../helpers/kinds.js';
import { configProblems } from '../../helpers/config.js';

const bytes = (s: string) => Buffer.byteLength(s);

const problems = (source: string) => configProblems(source);

describe('IRC config', () => {
  it('parses with its defaults', () => {
    const { config } = parseConfig(
      '[[channels]]\nid = "irc"\ntype = "irc"\nserver = "irc.libera.chat:6697"\nnick = "channeld"\nallow_from = ["*"]\n',
      'daemon.config.toml',
      kinds,
      {},
    );
    expect(config.channels[0]).toMatchObject({ tls: true, channels: [], flood_burst: 4, flood_interval_ms: 2000, require_mention: true });
  });

  it('names a bad server, nick, channel or inline password with file:line:col', () => {
    const src =
      '[[channels]]\nid = "irc"\ntype = "irc"\nallow_from = ["*"]\nserver = "irc.libera.chat"\nnick = "9lives"\nchannels = ["nohash"]\npassword = "x"\n';
    const p = problems(src);
    expect(p).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^daemon\.config\.toml:5:10: channels\[0\]\.server: write host:port/),
        expect.stringMatching(/^daemon\.config\.toml:6:8: channels\[0\]\.nick: write an IRC nickname/),
        expect.stringMatching(/^daemon\.config\.toml:7:12: channels\[0\]\.channels\[0\]: write a channel name/),
        expect.stringMatching(/^daemon\.config\.toml:8:1: channels\[0\]\.password: inline secrets are refused/),
      ]),
    );
  });
});

describe('IRC lines', () => {
  it('parses tags, prefix, middle and trailing parameters; formats a trailing one', () => {
    expect(parseLine('@msgid=1 :a!b@c PRIVMSG #x :hi there')).toEqual({ prefix: 'a!b@c', command: 'PRIVMSG', params: ['#x', 'hi there'] });
    expect(parseLine('PING :irc.test')).toEqual({ prefix: undefined, command: 'PING', params: ['irc.test'] });
    expect(parseLine(':srv')).toBeUndefined();
    expect(formatLine('PRIVMSG', '#x', ':) ok')).toBe('PRIVMSG #x ::) ok');
    expect(() => formatLine('PRIVMSG', '#x', 'a\r\nQUIT')).toThrow(/CR, LF or NUL/);
  });

  it('matches masks with * and ? in RFC 1459 case', () => {
    expect(maskMatches('alice!*@*.example.org', 'Alice!~al@host.example.org')).toBe(true);
    expect(maskMatches('alice!*@*.example.org', 'alice!~al@example.org.evil')).toBe(false);
    expect(maskMatches('[bot]?!*@*', '{BOT}1!u@h')).toBe(true);
  });

  it("a sender's id is the allow_from entry that lets them in, else their full mask", () => {
    const from = { nick: 'carol', user: '~c', host: 'h.example' };
    expect(senderId(from, ['carol!~c@h.example', 'carol!*@*'])).toBe('carol!~c@h.example');
    expect(senderId(from, ['*', 'carol!*@*'])).toBe('carol!*@*');
    expect(senderId(from, ['*'])).toBe('carol!~c@h.example');
  });

  it('addresses the bot by "nick:", "@nick" or the nick as a word in channels; DMs always; CTCP is not a message', () => {
    const base = { channelId: 'irc', from: { nick: 'al', user: 'u', host: 'h' }, selfNick: 'cbot', allowFrom: ['*'] };
    expect(normalizePrivmsg({ ...base, target: '#Room', text: 'cbot: hi' })).toMatchObject({
      chat: { id: '#room', type: 'group' },
      text: 'hi',
      addressed: true,
    });
    expect(normalizePrivmsg({ ...base, target: '#room', text: 'ask @cbot now' })?.addressed).toBe(true);
    expect(normalizePrivmsg({ ...base, target: '#room', text: 'cbotanic garden' })?.addressed).toBe(false);
    expect(normalizePrivmsg({ ...base, target: 'CBOT', text: 'yo' })).toMatchObject({ chat: { id: 'al', type: 'dm' }, addressed: true });
    expect(normalizePrivmsg({ ...base, target: 'cbot', text: '\u0001VERSION\u0001' })).toBeUndefined();
    expect(normalizePrivmsg({ ...base, from: { nick: 'CBot', user: 'u', host: 'h' }, target: '#room', text: 'me' })).toBeUndefined();
  });

  it('takes alternates when the nick is in use', () => {
    expect(alternateNicks('cbot').slice(0, 4)).toEqual(['cbot', 'cbot_', 'cbot__', 'cbot1']);
  });
});

describe('Markdown to IRC lines', () => {
  it('prose loses its markup, code keeps its lines without the fences, blank lines go', () => {
    const md = '# Head\n\n**b** _i_ ~~s~~ `a*b*c` [t](https://x.y/a_b) snake_case_name\n\n```js\n  let a = b * c * d; // **x**\n```\n* item';
    expect(markdownToPlainLines(md).map((l) => l.text)).toEqual([
      'Head',
      'b i s a*b*c t (https://x.y/a_b) snake_case_name',
      '  let a = b * c * d; // **x**',
      '- item',
    ]);
  });

  it('wraps at word boundaries by UTF-8 bytes and cuts a word longer than a line without splitting a character', () => {
    const line = 'äöü '.repeat(50).trim();
    const parts = wrapLine(line, 40);
    for (const p of parts) expect(bytes(p)).toBeLessThanOrEqual(40);
    expect(parts.join(' ')).toBe(line);
    const long = 'é'.repeat(30);
    const cut = wrapLine(long, 7);
    expect(cut.every((p) => bytes(p) <= 7 && !p.includes('\ufffd'))).toBe(true);
    expect(cut.join('')).toBe(long);
  });

  it('an overlong code line is cut, not wrapped: joined it is the line', () => {
    const code = `    x = "${'z'.repeat(100)}"`;
    const lines = ircLines(`\`\`\`\n${code}\n\`\`\``, 30);
    expect(lines.join('')).toBe(code);
  });
});

describe('the flood token bucket', () => {
  it('lets a burst go at once and then one line per interval, in order', async () => {
    const bucket = new TokenBucket(2, 40);
    const at: number[] = [];
    const start = Date.now();
    await Promise.all([0, 1, 2, 3].map(() => bucket.take(new AbortController().signal).then(() => at.push(Date.now() - start))));
    expect(at).toHaveLength(4);
    // Lines 3 and 4 waited for the refill: at least one and two intervals (less timer slack).
    expect(at[2]!).toBeGreaterThanOrEqual(35);
    expect(at[3]!).toBeGreaterThanOrEqual(75);
  });

  it('a wait ends with its signal, and the next waiter still gets its turn', async () => {
    const bucket = new TokenBucket(1, 60_000);
    await bucket.take(new AbortController().signal);
    const ac = new AbortController();
    const cut = bucket.take(ac.signal);
    ac.abort(new Error('stopped'));
    await expect(cut).rejects.toThrow('stopped');
  });
});
