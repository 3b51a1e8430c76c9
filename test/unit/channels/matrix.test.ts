import { describe, expect, it } from 'vitest';
import { fitContent, MAX_CONTENT_BYTES } from '../../../channels/matrix/fit.js';
import { markdownToMatrixHtml, neutraliseRoomMention } from '../../../channels/matrix/markdown.js';
import { normalizeEvent, stripReplyFallback, type RoomView } from '../../../channels/matrix/normalize.js';
import { configProblems } from '../../helpers/config.js';

const table = (extra: string) =>
  `[[channels]]\nid = "mx"\ntype = "matrix"\nhomeserver_url = "https://matrix.example.org"\naccess_token_env = "MX"\nallow_from = ["*"]\n${extra}`;

describe('Matrix config', () => {
  it('names the key and its file:line:col', () => {
    expect(configProblems(table('user_id = "bot"\n'), 'daemon.config.toml', { MX: 't' })).toEqual([
      'daemon.config.toml:7:11: channels[0].user_id: write a Matrix user id, e.g. "@bot:example.org"',
    ]);
    expect(configProblems(table('user_id = "@bot:example.org"\nrooms = ["#general:example.org"]\n'), 'daemon.config.toml', { MX: 't' })).toEqual([
      'daemon.config.toml:8:9: channels[0].rooms[0]: write a room id, e.g. "!abcdef:example.org"',
    ]);
    expect(configProblems(table('user_id = "@bot:example.org"\nauto_jion = true\n'), 'daemon.config.toml', { MX: 't' })[0]).toMatch(
      /^daemon\.config\.toml:8:1: channels\[0\]\.auto_jion: unknown key "auto_jion"; did you mean `auto_join`\?$/,
    );
  });

  it('refuses an inline token and wants one', () => {
    expect(configProblems(table('user_id = "@bot:example.org"\naccess_token = "syt_x"\n'), 'daemon.config.toml', { MX: 't' }).join('\n')).toMatch(
      /access_token/,
    );
    expect(configProblems(table('user_id = "@bot:example.org"\n'), 'daemon.config.toml', {}).join('\n')).toMatch(/access_token/);
    expect(configProblems(table('user_id = "@bot:example.org"\n'), 'daemon.config.toml', { MX: 't' })).toEqual([]);
  });
});

describe('Matrix messages', () => {
  const view: RoomView = { self: '@bot:x.org', selfName: 'Helper', roomId: '!r:x.org', dm: false, sentByBot: (id) => id === '$mine' };
  const event = (content: Record<string, unknown>, sender = '@ada:x.org') => ({
    type: 'm.room.message',
    event_id: '$e1',
    sender,
    origin_server_ts: 5,
    content,
  });

  it('counts as addressed: m.mentions (when present, alone), a pill or the name (older clients), a reply to the bot', () => {
    const addressed = (content: Record<string, unknown>) => normalizeEvent(event(content), 'mx', view)?.addressed;
    expect(addressed({ msgtype: 'm.text', body: 'hi', 'm.mentions': { user_ids: ['@bot:x.org'] } })).toBe(true);
    expect(addressed({ msgtype: 'm.text', body: 'Helper: hi', 'm.mentions': {} })).toBe(false);
    expect(addressed({ msgtype: 'm.text', body: 'Helper: hi' })).toBe(true);
    expect(addressed({ msgtype: 'm.text', body: 'hi', formatted_body: '<a href="https://matrix.to/#/@bot:x.org">bot</a> hi' })).toBe(true);
    expect(addressed({ msgtype: 'm.text', body: 'helpers are nice' })).toBe(false);
    expect(addressed({ msgtype: 'm.text', body: '> <@bot:x.org> before\n\nmore', 'm.relates_to': { 'm.in_reply_to': { event_id: '$mine' } } })).toBe(true);
  });

  it('skips edits, other event types, its own messages; strips a reply fallback; reads files', () => {
    expect(normalizeEvent(event({ msgtype: 'm.text', body: '* x', 'm.relates_to': { rel_type: 'm.replace', event_id: '$a' } }), 'mx', view)).toBeUndefined();
    expect(normalizeEvent({ ...event({ body: 'x' }), type: 'm.reaction' }, 'mx', view)).toBeUndefined();
    expect(normalizeEvent(event({ msgtype: 'm.text', body: 'x' }, '@bot:x.org'), 'mx', view)).toBeUndefined();
    expect(stripReplyFallback('> <@a:b> quoted\n> more\n\nthe answer')).toBe('the answer');
    const file = normalizeEvent(event({ msgtype: 'm.image', body: 'cat.png', url: 'mxc://x.org/abc', info: { size: 10, mimetype: 'image/png' } }), 'mx', {
      ...view,
      dm: true,
    });
    expect(file).toMatchObject({
      chat: { id: '!r:x.org', type: 'dm' },
      addressed: true,
      attachments: [{ id: 'mxc://x.org/abc', type: 'image', size: 10, mime: 'image/png', name: 'cat.png' }],
    });
    expect(normalizeEvent(event({ msgtype: 'm.notice', body: 'beep' }), 'mx', view)?.sender.isBot).toBe(true);
    const threaded = normalizeEvent(event({ msgtype: 'm.text', body: 'in a thread', 'm.relates_to': { rel_type: 'm.thread', event_id: '$root' } }), 'mx', view);
    expect(threaded).toMatchObject({ threadId: '$root', text: 'in a thread' });
  });

  it('renders Markdown as HTML without letting model output form markup, and defuses @room', () => {
    expect(markdownToMatrixHtml('**b** <script>x</script>')).toBe('<p><strong>b</strong> &lt;script&gt;x&lt;/script&gt;</p>');
    expect(neutraliseRoomMention('hey @room and @roommate')).toBe('hey @\u2060room and @roommate');
  });
});

describe('Matrix event size', () => {
  const content = (text: string) => ({
    msgtype: 'm.text',
    body: text,
    format: 'org.matrix.custom.html',
    formatted_body: markdownToMatrixHtml(text),
    'm.mentions': {},
  });
  const size = (c: unknown) => Buffer.byteLength(JSON.stringify(c));

  it('an edit at the length limit in 3-byte characters fits: the fallback shrinks first, then the HTML goes', () => {
    const text = '漢字'.repeat(4000); // 8000 characters, 24,000 bytes
    const next = content(text);
    const editEvent = {
      ...next,
      body: `* ${text}`,
      formatted_body: `* ${next.formatted_body}`,
      'm.new_content': next,
      'm.relates_to': { rel_type: 'm.replace', event_id: '$a' },
    };
    expect(size(editEvent)).toBeGreaterThan(MAX_CONTENT_BYTES);
    const fitted = fitContent(editEvent);
    expect(size(fitted)).toBeLessThanOrEqual(MAX_CONTENT_BYTES);
    expect((fitted['m.new_content'] as { body: string }).body).toBe(text);
    expect(fitted['m.relates_to']).toEqual({ rel_type: 'm.replace', event_id: '$a' });
    const small = content('hello');
    expect(fitContent(small)).toBe(small);
  });
});
