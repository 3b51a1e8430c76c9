import { beforeEach, describe, expect, it } from 'vitest';
import type { FakeLlm } from '../fakes/llm/server.js';
import type { FakeTelegram } from '../fakes/telegram/server.js';
import type { FakeDiscord } from '../fakes/discord/server.js';
import type { FakeSlack } from '../fakes/slack/server.js';
import { waitFor } from '../helpers/daemon.js';
import { withChannelDaemon, withLlm } from '../helpers/fixtures.js';
import {
  discordChannel,
  discordEnv,
  slackChannel,
  slackEnv,
  telegramChannel,
  telegramEnv,
  withDiscord,
  withSlack,
  withTelegram,
} from '../helpers/platforms.js';

/** An agent on the fake LLM that hears voice notes and, with `speech`, answers them aloud. */
const agentConfig = (url: string, speech: boolean) =>
  `[agent]\nprovider = "openai-compatible"\nbase_url = "${url}"\nmodel = "chat-1"\ntranscription_model = "whisper-1"\n` +
  (speech ? 'speech_model = "tts-1"\nspeech_voice = "nova"\n' : '') +
  `\n[models."whisper-1"]\ninput = ["audio"]\n\n[models."tts-1"]\n\n`;

describe('spoken replies on Telegram', () => {
  let tg: FakeTelegram;
  let llm: FakeLlm;
  beforeEach(async () => {
    tg = await withTelegram();
    llm = await withLlm();
  });

  it('a voice note is answered in text and as a voice note (sendVoice with the speech model audio); a typed message in text only', async () => {
    const d = await withChannelDaemon(agentConfig(llm.url, true) + telegramChannel(tg), telegramEnv(tg));
    llm.scriptTranscription({ text: 'what is the weather in Lisbon' });
    llm.script({ kind: 'stream', chunks: [{ content: 'Sunny and ' }, { content: 'warm.' }] });
    tg.dmVoice(Buffer.from('OggS-fake-opus-bytes'), 3);
    await waitFor(() => tg.files.length === 1, 15_000);
    // The text is kept, and sent before the voice note.
    expect(tg.texts(42).at(-1)).toBe('Sunny and warm.');
    expect(String(llm.requests[0]!.body.messages.at(-1)!.content)).toContain('what is the weather in Lisbon');
    expect(llm.speeches).toEqual([{ model: 'tts-1', input: 'Sunny and warm.', voice: 'nova', response_format: 'opus' }]);
    expect(tg.files[0]).toMatchObject({ method: 'sendVoice', chatId: 42, name: 'answer.ogg' });
    expect(tg.files[0]!.bytes.toString()).toBe('OggSSunny and warm.');
    await waitFor(() => d.logs.entries().some((l) => l.msg === 'spoken reply sent'), 10_000);

    // Typed: text only. Its answer arriving after the voice one settles that nothing more was sent.
    tg.dm('and tomorrow?');
    await waitFor(() => tg.texts(42).at(-1) === 'and tomorrow?', 15_000);
    expect(llm.speeches).toHaveLength(1);
    expect(tg.files).toHaveLength(1);

    // The speech model fails: the text is there, the failure is one log line, no file.
    llm.failSpeech(500);
    llm.scriptTranscription({ text: 'and on Sunday?' });
    llm.script({ kind: 'stream', chunks: [{ content: 'Rain.' }] });
    tg.dmVoice(Buffer.from('OggS-more'), 2);
    await waitFor(() => d.logs.entries().some((l) => l.msg === 'spoken reply not sent; the answer went as text only'), 15_000);
    expect(tg.texts(42).at(-1)).toBe('Rain.');
    expect(tg.files).toHaveLength(1);
    expect(d.logs.entries().find((l) => l.msg === 'spoken reply not sent; the answer went as text only')!.reason).toMatch(/HTTP 500/);
  });

  it('without speech_model a voice note is answered in text only', async () => {
    await withChannelDaemon(agentConfig(llm.url, false) + telegramChannel(tg), telegramEnv(tg));
    llm.scriptTranscription({ text: 'hello' });
    llm.script({ kind: 'stream', chunks: [{ content: 'Hi.' }] });
    tg.dmVoice(Buffer.from('OggS-x'), 1);
    await waitFor(() => tg.texts(42).at(-1) === 'Hi.', 15_000);
    tg.dm('typed');
    await waitFor(() => tg.texts(42).at(-1) === 'typed', 15_000);
    expect(llm.speeches).toEqual([]);
    expect(tg.files).toEqual([]);
  });
});

describe('spoken replies elsewhere', () => {
  let llm: FakeLlm;
  beforeEach(async () => {
    llm = await withLlm();
  });

  it('Discord: the answer to a voice message is also posted as an audio file', async () => {
    const dc: FakeDiscord = await withDiscord();
    await withChannelDaemon(agentConfig(llm.url, true) + discordChannel(dc), discordEnv(dc));
    llm.script({ kind: 'stream', chunks: [{ content: 'Table booked.' }] });
    dc.dmWithFile('', { bytes: Buffer.from('book a table for two'), filename: 'voice-message.ogg', content_type: 'audio/ogg', duration_secs: 2.5 });
    await waitFor(() => dc.files.length === 1, 15_000);
    expect(dc.texts(dc.dmChannel)).toEqual(['Table booked.']);
    expect(dc.files[0]).toMatchObject({ channelId: dc.dmChannel, name: 'answer.ogg', mime: 'audio/ogg' });
    expect(dc.files[0]!.bytes.toString()).toBe('OggSTable booked.');
  });

  it('Slack (no file sending here): the answer to an audio file is text only, and one log line says so', async () => {
    const sl: FakeSlack = await withSlack();
    const d = await withChannelDaemon(agentConfig(llm.url, true) + slackChannel(sl, 'native_stream = false\n'), slackEnv(sl));
    llm.script({ kind: 'stream', chunks: [{ content: 'Noted.' }] });
    sl.push(sl.dmFileEvent('', { bytes: Buffer.from('remind me about the invoice'), name: 'audio_message.m4a', mimetype: 'audio/mp4', filetype: 'm4a' }));
    const line = await waitFor(
      () => d.logs.entries().find((l) => l.msg === 'spoken reply not sent: this channel kind cannot send files; the answer went as text only'),
      15_000,
    );
    expect(line).toMatchObject({ channel: 'sl' });
    expect(llm.speeches).toEqual([]);
    expect(sl.messages.map((m) => m.text)).toContain('Noted.');
  });
});
