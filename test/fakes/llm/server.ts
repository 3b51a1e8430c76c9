import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Chunk {
  content?: string;
  reasoning?: string;
  toolCalls?: Array<{ id: string; name: string; arguments: string }>;
  /** Pause before this chunk. */
  delayMs?: number;
  /** Held until this settles: a model that takes exactly as long as the test wants. */
  after?: Promise<unknown>;
}

/** Usage as OpenAI reports it in the last stream chunk (details optional, as many servers omit them). */
export interface FakeUsage {
  prompt_tokens: number;
  completion_tokens: number;
  prompt_tokens_details?: { cached_tokens: number };
  completion_tokens_details?: { reasoning_tokens: number };
}

/** What the fake does with one chat/completions request. */
export type Script =
  | { kind: 'stream'; chunks: Chunk[]; finish?: 'stop' | 'tool_calls'; usage?: FakeUsage | null }
  | { kind: 'status'; status: number; retryAfterS?: number; body?: string }
  /** Sends these chunks, then stops writing but keeps the connection open. */
  | { kind: 'stall'; chunks?: Chunk[] }
  /** Sends these chunks, then destroys the socket. */
  | { kind: 'disconnect'; chunks?: Chunk[] }
  /** The default echo of the last user message, after a pause: a slow model. */
  | { kind: 'echo'; delayMs: number };

export interface RecordedRequest {
  body: {
    model: string;
    messages: Array<{ role: string; content: unknown; tool_calls?: unknown; tool_call_id?: string }>;
    tools?: unknown[];
    stream?: boolean;
    temperature?: number;
  };
  headers: IncomingMessage['headers'];
  /** Whether the client closed the connection before the answer ended. */
  clientClosed: boolean;
}

/** One `/audio/transcriptions` request as the multipart form carried it. */
export interface RecordedTranscription {
  model: string;
  fileName: string;
  mime: string;
  audio: Buffer;
  headers: IncomingMessage['headers'];
}

/** One `/audio/speech` request (OpenAI's JSON body). */
export interface RecordedSpeech {
  model: string;
  input: string;
  voice: string;
  response_format?: string;
}

/** What the fake answers one transcription with: a text, or an HTTP error. */
export type TranscriptionScript = { text: string } | { status: number };

/**
 * An OpenAI-compatible server on 127.0.0.1 that streams SSE chat.completion.chunk frames,
 * scriptable per request (content, reasoning_content, tool calls, usage) with faults:
 * HTTP errors, 429 with retry-after, a stall, a disconnect mid-stream. With no script
 * queued it echoes the last user message. `POST /audio/transcriptions` takes OpenAI's multipart
 * form (`file`, `model`) and answers `{ "text" }`: the scripted text, else the audio's bytes
 * read as UTF-8 (a test's "voice note" is its own transcript). `POST /audio/speech` takes
 * OpenAI's JSON (`model`, `input`, `voice`, `response_format`) and answers audio bytes:
 * `OggS` and the input (a test's spoken answer carries its own text), as `audio/ogg` when
 * Opus was asked for, or a scripted HTTP status.
 */
export class FakeLlm {
  readonly requests: RecordedRequest[] = [];
  readonly transcriptions: RecordedTranscription[] = [];
  readonly speeches: RecordedSpeech[] = [];
  /** `/embeddings` inputs, in order. */
  readonly embeddingInputs: string[] = [];
  /** The vector `/embeddings` gives an exact input; any other gets one from its words (a 16-dimension hash). */
  readonly vectors = new Map<string, number[]>();
  #embeddingFaults = 0;
  readonly #speechFaults: number[] = [];
  readonly #transcripts: TranscriptionScript[] = [];
  readonly #queue: Script[] = [];
  readonly #byModel = new Map<string, Script[]>();
  readonly #server: Server;
  readonly #open = new Set<ServerResponse>();
  url = '';

  constructor() {
    this.#server = createServer((req, res) => void this.#handle(req, res));
  }

  async start(): Promise<string> {
    await new Promise<void>((r) => this.#server.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/v1`;
    return this.url;
  }

  /** Queues what the next requests get, in order. */
  script(...scripts: Script[]): this {
    this.#queue.push(...scripts);
    return this;
  }

  /** Queues what the next requests for `model` get, before the general queue. */
  scriptFor(model: string, ...scripts: Script[]): this {
    this.#byModel.set(model, [...(this.#byModel.get(model) ?? []), ...scripts]);
    return this;
  }

  /** Queues what the next transcriptions get, in order. */
  scriptTranscription(...scripts: TranscriptionScript[]): this {
    this.#transcripts.push(...scripts);
    return this;
  }

  /** The next `n` embeddings requests fail with HTTP 500. */
  failEmbeddings(n: number): this {
    this.#embeddingFaults += n;
    return this;
  }

  /** The next speech requests fail with these HTTP statuses, in order. */
  failSpeech(...statuses: number[]): this {
    this.#speechFaults.push(...statuses);
    return this;
  }

  async close(): Promise<void> {
    for (const res of this.#open) res.destroy();
    this.#server.closeAllConnections();
    await new Promise<void>((r) => this.#server.close(() => r()));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method === 'POST' && req.url?.endsWith('/audio/transcriptions')) return this.#transcribe(req, res);
    if (req.method === 'POST' && req.url?.endsWith('/audio/speech')) return this.#speak(req, res);
    if (req.method === 'POST' && req.url?.endsWith('/embeddings')) return this.#embed(req, res);
    if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
      res.writeHead(404).end();
      return;
    }
    let raw = '';
    for await (const c of req) raw += String(c);
    const rec: RecordedRequest = { body: JSON.parse(raw) as RecordedRequest['body'], headers: req.headers, clientClosed: false };
    this.requests.push(rec);
    res.on('close', () => {
      if (!res.writableFinished) rec.clientClosed = true;
      this.#open.delete(res);
    });
    this.#open.add(res);
    const queued = this.#byModel.get(rec.body.model)?.shift() ?? this.#queue.shift() ?? this.#echo(rec);
    const script: Exclude<Script, { kind: 'echo' }> = queued.kind === 'echo' ? this.#echo(rec, queued.delayMs) : queued;
    if (script.kind === 'status') {
      res.writeHead(script.status, {
        'content-type': 'application/json',
        ...(script.retryAfterS !== undefined ? { 'retry-after': String(script.retryAfterS) } : {}),
      });
      res.end(script.body ?? JSON.stringify({ error: { message: `fake status ${script.status}`, type: 'server_error' } }));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    const send = (obj: unknown) => res.write(`data: ${JSON.stringify(obj)}\n\n`);
    const frame = (delta: Record<string, unknown>, finish: string | null = null) => ({
      id: 'chatcmpl-fake',
      object: 'chat.completion.chunk',
      created: 1,
      model: rec.body.model,
      choices: [{ index: 0, delta, finish_reason: finish }],
    });
    const chunks = script.chunks ?? [];
    for (const [i, c] of chunks.entries()) {
      if (c.delayMs) await new Promise((r) => setTimeout(r, c.delayMs));
      if (c.after) await Promise.race([c.after, new Promise((r) => res.once('close', r))]);
      if (res.destroyed) return;
      const delta: Record<string, unknown> = i === 0 ? { role: 'assistant' } : {};
      if (c.content !== undefined) delta.content = c.content;
      if (c.reasoning !== undefined) delta.reasoning_content = c.reasoning;
      if (c.toolCalls)
        delta.tool_calls = c.toolCalls.map((t, index) => ({ index, id: t.id, type: 'function', function: { name: t.name, arguments: t.arguments } }));
      send(frame(delta));
    }
    if (script.kind === 'stall') return; // headers and chunks sent; nothing more, ever
    if (script.kind === 'disconnect') {
      // Let the chunks reach the client first: this is a drop mid-answer, not a refused request.
      await new Promise((r) => setTimeout(r, 30));
      res.socket?.destroy();
      return;
    }
    send(frame({}, script.finish ?? (chunks.some((c) => c.toolCalls) ? 'tool_calls' : 'stop')));
    if (script.usage !== null)
      send({
        id: 'chatcmpl-fake',
        object: 'chat.completion.chunk',
        created: 1,
        model: rec.body.model,
        choices: [],
        usage: { ...(script.usage ?? { prompt_tokens: 11, completion_tokens: 7 }), total_tokens: 18 },
      });
    res.end('data: [DONE]\n\n');
  }

  async #transcribe(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const answer = (status: number, body: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    let form: FormData;
    try {
      // undici parses multipart/form-data exactly as a server would.
      form = await new Request('http://fake/', {
        method: 'POST',
        headers: { 'content-type': req.headers['content-type'] ?? '' },
        body: Buffer.concat(chunks),
      }).formData();
    } catch {
      return answer(400, { error: { message: 'expected multipart/form-data', type: 'invalid_request_error' } });
    }
    const file = form.get('file');
    const model = form.get('model');
    if (!(file instanceof File) || typeof model !== 'string')
      return answer(400, { error: { message: 'file and model are required', type: 'invalid_request_error' } });
    const audio = Buffer.from(await file.arrayBuffer());
    this.transcriptions.push({ model, fileName: file.name, mime: file.type, audio, headers: req.headers });
    const script = this.#transcripts.shift() ?? { text: audio.toString('utf8') };
    if ('status' in script) return answer(script.status, { error: { message: `fake status ${script.status}`, type: 'server_error' } });
    answer(200, { text: script.text });
  }

  async #embed(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw = '';
    for await (const c of req) raw += String(c);
    const { input } = JSON.parse(raw) as { input: string };
    this.embeddingInputs.push(input);
    if (this.#embeddingFaults > 0) {
      this.#embeddingFaults--;
      return void res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'fake status 500' } }));
    }
    const vector =
      this.vectors.get(input) ??
      Array.from({ length: 16 }, (_, i) => (input.toLowerCase().match(/\w+/g) ?? []).filter((w) => w.charCodeAt(0) % 16 === i).length);
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ object: 'list', data: [{ object: 'embedding', index: 0, embedding: vector }] }));
  }

  async #speak(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw = '';
    for await (const c of req) raw += String(c);
    const body = JSON.parse(raw) as RecordedSpeech;
    this.speeches.push(body);
    const fault = this.#speechFaults.shift();
    if (fault) return void res.writeHead(fault, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: `fake status ${fault}` } }));
    if (typeof body.input !== 'string' || typeof body.voice !== 'string')
      return void res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'input and voice are required' } }));
    const audio = Buffer.from(`OggS${body.input}`);
    res.writeHead(200, { 'content-type': body.response_format === 'opus' ? 'audio/ogg' : 'audio/mpeg', 'content-length': String(audio.length) }).end(audio);
  }

  /** The default answer: the last user message, streamed word by word. */
  #echo(rec: RecordedRequest, firstDelayMs = 5): Extract<Script, { kind: 'stream' }> {
    const last = [...rec.body.messages].reverse().find((m) => m.role === 'user');
    const text = typeof last?.content === 'string' ? last.content : JSON.stringify(last?.content ?? '');
    return { kind: 'stream', chunks: (text.match(/\S+\s*/g) ?? ['']).map((w, i) => ({ content: w, delayMs: i === 0 ? firstDelayMs : 5 })) };
  }
}
