import { describe, expect, it } from 'vitest';
import { commandOf } from '../../../src/contracts/commands.js';
import type { ChannelMessage } from '../../../src/contracts/message.js';

const message = (text: string) => ({ text }) as ChannelMessage;

describe('commandOf: a message is parsed once, whoever asks', () => {
  it('answers the same parse for the same message and bot name', () => {
    const msg = message('/queue interrupt');
    const first = commandOf(msg, 'bot');
    expect(first).toEqual({ name: 'queue', args: 'interrupt' });
    // The same object, not an equal one: the dispatcher's parse is the one the runtime reads.
    expect(commandOf(msg, 'bot')).toBe(first);
  });

  it('parses again for another bot name, and keeps a non-command as such', () => {
    const msg = message('/stop@other');
    expect(commandOf(msg, 'bot')).toBeUndefined();
    expect(commandOf(msg, 'other')).toEqual({ name: 'stop', args: '' });
    expect(commandOf(message('hello'), 'bot')).toBeUndefined();
  });

  it('takes a command after any leading white space, and nothing else for one', () => {
    // The first test (a slash after white space) must agree with the parse's trim.
    for (const text of ['  /help', '\n\t/help', '\u00a0/help', '\u2028/help', '\ufeff/help']) {
      expect(commandOf(message(text), 'bot'), JSON.stringify(text)).toEqual({ name: 'help', args: '' });
    }
    for (const text of ['', ' ', 'help /help', 'x/help', '\u200b/help', '/']) {
      expect(commandOf(message(text), 'bot'), JSON.stringify(text)).toBeUndefined();
    }
  });
});
