import { describe, expect, it } from 'vitest';
import { configProblems } from '../../helpers/config.js';

const problems = (source: string): string[] => configProblems(source, '/etc/channeld/daemon.config.toml', {});
const web = `[[channels]]\nid = "web"\ntype = "webchat"\n`;

describe('voice and link keys', () => {
  it('a transcription_model must be a [models] entry that takes audio', () => {
    const agent = `[agent]\nprovider = "openai-compatible"\nbase_url = "http://127.0.0.1:1/v1"\nmodel = "m"\ntranscription_model = "whisper-1"\n`;
    expect(problems(`${agent}${web}`)).toEqual(['daemon.config.toml:5:23: agent.transcription_model: add [models."whisper-1"] with input = ["audio"]']);
    expect(problems(`${agent}${web}[models."whisper-1"]\ninput = ["text"]\n`)).toHaveLength(1);
    expect(
      problems(`${agent}read_links = true\nshow_transcript = true\nmax_audio_duration_ms = 60000\n${web}[models."whisper-1"]\ninput = ["audio"]\n`),
    ).toEqual([]);
  });
});
