import { beforeEach, describe, expect, it } from 'vitest';
import type { FakeLlm, RecordedRequest } from '../fakes/llm/server.js';
import type { FakeDiscord } from '../fakes/discord/server.js';
import type { FakeSlack } from '../fakes/slack/server.js';
import type { FakeTelegram } from '../fakes/telegram/server.js';
import { whatsappChannel, whatsappEnv, withWhatsApp } from '../helpers/whatsapp.js';
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

/** The last user message of a request, as text. */
function userText(req: RecordedRequest): string {
  const last = [...req.body.messages].reverse().find((m) => m.role === 'user')!;
  return typeof last.content === 'string' ? last.content : JSON.stringify(last.content);
}

/** An agent on the fake LLM; `agentExtra` adds [agent] keys (a transcription model or not). */
const agentConfig = (url: string, agentExtra: string) =>
  `[agent]\nprovider = "openai-compatible"\nbase_url = "${url}"\nmodel = "chat-1"\n${agentExtra}\n\n[models."whisper-1"]\ninput = ["audio"]\n\n`;

describe('voice notes on Telegram', () => {
  let tg: FakeTelegram;
  let llm: FakeLlm;
  beforeEach(async () => {
    tg = await withTelegram();
    llm = await withLlm();
  });

  const start = (agentExtra: string) => withChannelDaemon(agentConfig(llm.url, agentExtra) + telegramChannel(tg), telegramEnv(tg));

  it('a voice note reaches the model as its transcript, marked as transcribed, and show_transcript echoes it', async () => {
    llm.scriptTranscription({ text: 'what is the weather in Lisbon' });
    llm.script({ kind: 'stream', chunks: [{ content: 'Sunny.' }] });
    await start('transcription_model = "whisper-1"\nshow_transcript = true');
    tg.dmVoice(Buffer.from('OggS-fake-opus-bytes'), 3);
    await waitFor(() => tg.texts(42).at(-1)?.includes('Sunny.'), 10_000);
    expect(llm.transcriptions).toHaveLength(1);
    expect(llm.transcriptions[0]).toMatchObject({ model: 'whisper-1', fileName: 'voice.ogg', mime: 'audio/ogg' });
    expect(llm.transcriptions[0]!.audio.toString()).toBe('OggS-fake-opus-bytes');
    const text = userText(llm.requests[0]!);
    expect(text).toContain("[transcribed from the user's voice message] what is the weather in Lisbon");
    expect(tg.texts(42).at(-1)).toMatch(/^🎙️ “what is the weather in Lisbon”\s+Sunny\.$/);

    // The session keeps what was said: the next turn's history has the transcript.
    tg.dm('and tomorrow?');
    await waitFor(() => llm.requests.length === 2, 10_000);
    expect(JSON.stringify(llm.requests[1]!.body.messages)).toContain('what is the weather in Lisbon');
  });

  it('a failed transcription and a too long voice note are said, not silent', async () => {
    llm.scriptTranscription({ status: 500 });
    await start('transcription_model = "whisper-1"\nmax_audio_duration_ms = 60000');
    tg.dmVoice(Buffer.from('first'), 3);
    await waitFor(() => tg.texts(42).length === 1, 10_000);
    expect(tg.texts(42)[0]).toMatch(/^ℹ️ voice file could not be transcribed \(.*HTTP 500/);
    tg.dmVoice(Buffer.from('second'), 61);
    await waitFor(() => tg.texts(42).length === 2, 10_000);
    expect(tg.texts(42)[1]).toMatch(/^ℹ️ voice file is 61 s long, more than the 60 s limit, so it was not transcribed\./);
    expect(llm.transcriptions).toHaveLength(1);
  });

  it('without a transcription model the user is told once per conversation that voice is not understood', async () => {
    await start('');
    tg.dmVoice(Buffer.from('hello'));
    await waitFor(() => tg.texts(42).length === 1, 10_000);
    expect(tg.texts(42)[0]).toMatch(/^ℹ️ Voice messages are not understood here/);
    tg.dmVoice(Buffer.from('hello again'));
    await waitFor(() => llm.requests.length === 2 && tg.texts(42).length === 2, 10_000);
    expect(tg.texts(42)[1]).not.toContain('not understood here');
    expect(llm.transcriptions).toHaveLength(0);
    expect(tg.downloads).toHaveLength(0);
  });
});

describe('audio files on Discord and Slack', () => {
  let llm: FakeLlm;
  beforeEach(async () => {
    llm = await withLlm();
  });
  const agent = () => agentConfig(llm.url, 'transcription_model = "whisper-1"\nmax_audio_duration_ms = 60000');

  it('a Discord voice message is transcribed; one longer than max_audio_duration_ms is not fetched', async () => {
    const dc: FakeDiscord = await withDiscord();
    await withChannelDaemon(agent() + discordChannel(dc), discordEnv(dc));
    dc.dmWithFile('', { bytes: Buffer.from('book a table for two'), filename: 'voice-message.ogg', content_type: 'audio/ogg', duration_secs: 2.5 });
    await waitFor(() => llm.requests.length === 1, 10_000);
    expect(userText(llm.requests[0]!)).toContain("[transcribed from the user's voice message] book a table for two");
    expect(llm.transcriptions[0]).toMatchObject({ fileName: 'voice-message.ogg', mime: 'audio/ogg' });
    await waitFor(() => dc.texts(dc.dmChannel).length === 1, 10_000);

    dc.dmWithFile('', { bytes: Buffer.from('long'), filename: 'voice-message.ogg', content_type: 'audio/ogg', duration_secs: 75 });
    await waitFor(() => dc.texts(dc.dmChannel).length === 2, 10_000);
    expect(dc.texts(dc.dmChannel)[1]).toMatch(/^ℹ️ voice-message\.ogg is 75 s long, more than the 60 s limit/);
    expect(dc.cdnDownloads).toHaveLength(1);
    expect(llm.transcriptions).toHaveLength(1);
  });

  it('a WhatsApp voice note (audio with voice: true) is transcribed', async () => {
    const wa = await withWhatsApp();
    const d = await withChannelDaemon(agent() + whatsappChannel(wa), whatsappEnv(wa));
    wa.webhookUrl = `${d.url}/webhooks/wa`;
    wa.media.set('5550001', { bytes: Buffer.from('call the plumber'), mime: 'audio/ogg' });
    const m = { ...wa.textMessage(''), type: 'audio', audio: { id: '5550001', mime_type: 'audio/ogg; codecs=opus', voice: true } };
    delete (m as { text?: unknown }).text;
    await wa.deliver(wa.notification([m]));
    await waitFor(() => llm.requests.length === 1, 10_000);
    expect(userText(llm.requests[0]!)).toContain("[transcribed from the user's voice message] call the plumber");
    expect(llm.transcriptions[0]).toMatchObject({ fileName: 'voice.ogg', mime: 'audio/ogg' });
  });

  it('a Slack audio file is transcribed', async () => {
    const sl: FakeSlack = await withSlack();
    await withChannelDaemon(agent() + slackChannel(sl, 'native_stream = false\n'), slackEnv(sl));
    sl.push(sl.dmFileEvent('', { bytes: Buffer.from('remind me about the invoice'), name: 'audio_message.m4a', mimetype: 'audio/mp4', filetype: 'm4a' }));
    await waitFor(() => llm.requests.length === 1, 15_000);
    expect(userText(llm.requests[0]!)).toContain("[transcribed from the user's voice message] remind me about the invoice");
    expect(llm.transcriptions[0]).toMatchObject({ model: 'whisper-1', fileName: 'audio_message.m4a' });
  });
});
