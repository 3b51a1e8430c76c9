import { describe, expect, it } from 'vitest';
import { markdownToTelegramHtml } from '../../../channels/telegram/markdown.js';
import { malformedUpdate, normalizeUpdate } from '../../../channels/telegram/normalize.js';

const bot = { id: 99, username: 'my_bot' };

describe('Markdown to Telegram HTML', () => {
  it('renders bold, italic, code, links and fenced code with its language', () => {
    expect(markdownToTelegramHtml('**bold** and *it* and `x<y`')).toBe('<b>bold</b> and <i>it</i> and <code>x&lt;y</code>');
    expect(markdownToTelegramHtml('see [docs](https://example.org/a?b=1&c=2)')).toBe('see <a href="https://example.org/a?b=1&amp;c=2">docs</a>');
    expect(markdownToTelegramHtml('```python\nif a < b:\n    print("**no**")\n```')).toBe(
      '<pre><code class="language-python">if a &lt; b:\n    print("**no**")</code></pre>',
    );
  });

  it('escapes everything else, so model output cannot inject markup', () => {
    expect(markdownToTelegramHtml('<script>alert(1)</script> & <b>')).toBe('&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;');
  });

  it('renders an unclosed fence (a draft mid-block) as code to the end', () => {
    expect(markdownToTelegramHtml('Start\n```js\nlet a = 1;')).toBe('Start\n<pre><code class="language-js">let a = 1;</code></pre>');
  });

  it('writes link URLs verbatim (escaped), never through the emphasis rules', () => {
    expect(markdownToTelegramHtml('see [x](https://a.org/_b_/c)')).toBe('see <a href="https://a.org/_b_/c">x</a>');
    expect(markdownToTelegramHtml('[x](https://a.org/**y**?q=_z_&r="1") and _it_')).toBe(
      '<a href="https://a.org/**y**?q=_z_&amp;r=&quot;1&quot;">x</a> and <i>it</i>',
    );
    // Formatting inside the link text closes inside the link.
    expect(markdownToTelegramHtml('[**bold** `c_d`](https://a.org/_e_)')).toBe('<a href="https://a.org/_e_"><b>bold</b> <code>c_d</code></a>');
  });

  it('leaves snake_case and lone asterisks alone', () => {
    expect(markdownToTelegramHtml('call my_func_name with 2 * 3')).toBe('call my_func_name with 2 * 3');
  });

  it('passes text with no markup through as it is, headings and lists still flattened', () => {
    for (const plain of ['load', 'load test answer', "it's 5 - 3 = 2, well-known + fine!", 'line one\nline two', '1. first\n2. second'])
      expect(markdownToTelegramHtml(plain)).toBe(plain);
    expect(markdownToTelegramHtml('- one\n- two')).toBe('• one\n• two');
    expect(markdownToTelegramHtml('# Title\nbody')).toBe('<b>Title</b>\nbody');
  });

  it('drops a NUL from the text, so the text cannot spell one of the placeholders it uses internally', () => {
    expect(markdownToTelegramHtml('a\u00000\u0000b')).toBe('a0b');
    expect(markdownToTelegramHtml('**x** a\u00000\u0000b `c`')).toBe('<b>x</b> a0b <code>c</code>');
  });
});

describe('Telegram update normalization', () => {
  it('an unreadable update (null, a message without chat) is named malformed and yields no message', () => {
    for (const u of [
      null,
      'x',
      [],
      { update_id: 1, message: {} },
      { update_id: 1, message: null },
      { update_id: 1, channel_post: { message_id: 1 } },
      { update_id: 1, message: { message_id: 1, chat: { id: 1, type: 'private' }, from: null } },
    ]) {
      expect(malformedUpdate(u), JSON.stringify(u)).toBeTypeOf('string');
      expect(normalizeUpdate(u as never, 'tg', bot)).toBeUndefined();
    }
    expect(malformedUpdate({ update_id: 1, edited_message: {} })).toBeUndefined();
  });

  const base = { message_id: 5, date: 1700000000, from: { id: 1, is_bot: false, first_name: 'Ada', last_name: 'L' } };

  it('a private chat is a DM and addressed; message ids are unique per chat', () => {
    const m = normalizeUpdate({ update_id: 1, message: { ...base, chat: { id: 1, type: 'private', first_name: 'Ada' }, text: 'hi' } } as never, 'tg', bot)!;
    expect(m).toMatchObject({
      messageId: '1:5',
      chat: { id: '1', type: 'dm' },
      addressed: true,
      sender: { id: '1', name: 'Ada L', isBot: false },
      text: 'hi',
      receivedAt: 1700000000000,
    });
  });

  it('forum topics become threads; captions are text; attachments are metadata', () => {
    const m = normalizeUpdate(
      {
        update_id: 2,
        message: {
          ...base,
          chat: { id: -100, type: 'supergroup', title: 'G', is_forum: true },
          message_thread_id: 9,
          is_topic_message: true,
          caption: '@my_bot look',
          caption_entities: [{ type: 'mention', offset: 0, length: 7 }],
          document: { file_id: 'F1', file_unique_id: 'u', file_size: 1234, mime_type: 'application/pdf', file_name: 'a.pdf' },
        },
      } as never,
      'tg',
      bot,
    )!;
    expect(m).toMatchObject({
      threadId: '9',
      chat: { type: 'group' },
      text: '@my_bot look',
      addressed: true,
      attachments: [{ id: 'F1', type: 'document', size: 1234, mime: 'application/pdf', name: 'a.pdf' }],
    });
  });

  it('in groups only a mention of this bot, a reply to it, or /cmd@thisbot addresses it', () => {
    const group = { chat: { id: -1, type: 'group', title: 'G' } };
    const msg = (extra: object) => normalizeUpdate({ update_id: 3, message: { ...base, ...group, ...extra } } as never, 'tg', bot)!;
    expect(msg({ text: 'hello all' }).addressed).toBe(false);
    expect(msg({ text: '@other_bot hi', entities: [{ type: 'mention', offset: 0, length: 10 }] }).addressed).toBe(false);
    expect(msg({ text: '/help@my_bot', entities: [{ type: 'bot_command', offset: 0, length: 12 }] }).addressed).toBe(true);
    expect(
      msg({ text: 'yes', reply_to_message: { message_id: 1, date: 0, chat: group.chat, from: { id: 99, is_bot: true, first_name: 'b' } } }).addressed,
    ).toBe(true);
  });
});

describe('rich message limits', async () => {
  const { chunkRich, richBlocks, richFits, toRichMarkdown, RICH_MAX_BLOCKS } = await import('../../../channels/telegram/rich.js');

  it('one piece while it fits; more than 500 blocks are split into pieces that each fit', () => {
    expect(chunkRich('# Title\n\n- a\n- b')).toEqual(['# Title\n\n- a\n- b']);
    const list = Array.from({ length: 1200 }, (_, i) => `- item ${i}`).join('\n');
    const pieces = chunkRich(list);
    expect(pieces.length).toBeGreaterThan(2);
    for (const p of pieces) {
      expect(richBlocks(p)).toBeLessThanOrEqual(RICH_MAX_BLOCKS);
      expect(richFits(p)).toBe(true);
    }
    expect(pieces.join('\n').replace(/\n+/g, '\n')).toBe(list);
  });

  it('nesting deeper than 16 levels goes the HTML way, at the text message limit', () => {
    const deep = Array.from({ length: 20 }, (_, i) => `${'  '.repeat(i)}- level ${i}`).join('\n');
    expect(richFits(deep)).toBe(false);
    expect(chunkRich(deep.repeat(1))).toEqual([deep]);
  });

  it('a "<" outside code cannot form markup; code keeps it', () => {
    expect(toRichMarkdown('a <b>x</b> `<i>`\n```html\n<p>\n```')).toBe('a &lt;b>x&lt;/b> `<i>`\n```html\n<p>\n```');
  });
});
