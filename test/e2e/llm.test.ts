import { beforeEach, describe, expect, it } from 'vitest';
import type { FakeLlm } from '../fakes/llm/server.js';
import type { TestDaemon } from '../helpers/daemon.js';
import { withChat, withDaemon, withLlm } from '../helpers/fixtures.js';
import { llmAgent, webchatChannel } from '../helpers/toml.js';

describe('web chat with an OpenAI-compatible model (fake LLM)', () => {
  let llm: FakeLlm;
  let d: TestDaemon | undefined;
  beforeEach(async () => {
    llm = await withLlm();
  });

  /** Starts the daemon with this API key, asks one question in the web chat, returns the final reply. */
  const askOnce = async (key: string) => {
    d = await withDaemon(config(llm.url), { LLM_KEY: key });
    const c = await withChat(d, 'tab');
    c.send('hello?');
    return (await c.finals(1, 15_000))[0];
  };

  const config = (url: string) => llmAgent(url, 'qwen3:8b', 'api_key_env = "LLM_KEY"\nsystem_prompt = "You are terse."\n') + webchatChannel();

  it('streams the model answer as a live draft, sending the system prompt, history and api key', async () => {
    llm.script({ kind: 'stream', chunks: ['The ', 'answer ', 'is ', 'forty-two.'].map((content) => ({ content, delayMs: 120 })) });
    d = await withDaemon(config(llm.url), { LLM_KEY: 'sk-test-123456' });
    const c = await withChat(d, 'tab');
    c.send('What is the answer?');
    const [final] = await c.finals();
    expect(final!.text).toBe('The answer is forty-two.');
    expect(c.replies().filter((f) => !f.final).length).toBeGreaterThanOrEqual(2);
    const req = llm.requests[0]!;
    expect(req.headers.authorization).toBe('Bearer sk-test-123456');
    expect(req.body.messages[0]).toMatchObject({ role: 'system' });
    expect(String(req.body.messages[0]!.content)).toContain('You are terse.');
    expect(req.body.messages.at(-1)).toEqual({ role: 'user', content: 'What is the answer?' });

    // The next turn carries the first as history.
    c.send('And again?');
    await c.finals(2);
    expect(llm.requests[1]!.body.messages.slice(1).map((m) => m.content)).toEqual(['What is the answer?', 'The answer is forty-two.', 'And again?']);
  });

  it('a model that answers HTTP 500 gets a readable error in the chat, not silence, and not "could not be reached"', async () => {
    llm.script({ kind: 'status', status: 500 }, { kind: 'status', status: 500 }, { kind: 'status', status: 500 });
    const final = await askOnce('k');
    expect(final!.text).toBe('⚠️ The model returned an error; try again.');
  });

  it('a wrong API key: one warn line per failed attempt says why (agent, model, host, status, code, provider message), never the key', async () => {
    const key = 'sk-live-a1b2c3d4e5f6g7h8i9';
    llm.script({
      kind: 'status',
      status: 401,
      body: JSON.stringify({
        error: { message: `Incorrect API key provided: ${key}. You can find your API key at https://platform.example/keys.`, type: 'invalid_request_error' },
      }),
    });
    const final = await askOnce(key);
    expect(final!.text).toBe('⚠️ The model provider refused our API key; the operator needs to check it.');
    const lines = d!.logs.lines.filter((l) => l.includes('model attempt failed')).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 40,
      agent: 'default',
      model: 'qwen3:8b',
      base_url_host: new URL(llm.url).host,
      status: 401,
      code: 'PROVIDER_AUTH_FAILED',
      retrying: false,
    });
    expect(String(lines[0]!.provider_message)).toMatch(/^Incorrect API key provided: \[redacted\]/);
    expect(d!.logs.text).not.toContain('a1b2c3d4e5f6g7h8i9');
  });

  it('a 5xx: one warn line per attempt, the retries marked', async () => {
    llm.script({ kind: 'status', status: 503 }, { kind: 'status', status: 503 }, { kind: 'stream', chunks: [{ content: 'finally' }] });
    const final = await askOnce('k');
    expect(final!.text).toBe('finally');
    const lines = d!.logs.lines.filter((l) => l.includes('model attempt failed')).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.map((l) => [l.status, l.code, l.attempt, l.retrying])).toEqual([
      [503, 'PROVIDER_FAILED', 1, true],
      [503, 'PROVIDER_FAILED', 2, true],
    ]);
  });
});
