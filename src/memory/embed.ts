import type { AgentConfig } from '../config/schema.js';
import { CodedError } from '../contracts/errors.js';
import { readCapped } from '../util/read-capped.js';
import { MAX_VECTOR_DIMENSIONS } from '../store/memories.js';

/** Bytes of an `/embeddings` answer read: two vectors of MAX_VECTOR_DIMENSIONS as JSON fit easily. */
const MAX_ANSWER_BYTES = 1024 * 1024;

/** Text to one vector; the signal is the turn's. */
export type Embedder = (text: string, signal: AbortSignal) => Promise<number[]>;

/**
 * One text's embedding through an OpenAI-compatible `POST {base_url}/embeddings` (`model`,
 * `input`), answered by `{ data: [{ embedding: [...] }] }`. Any failure is EMBEDDING_FAILED.
 */
export async function embed(o: { baseUrl: string; apiKey?: string; model: string; text: string; signal: AbortSignal }): Promise<number[]> {
  const url = `${o.baseUrl.replace(/\/+$/, '')}/embeddings`;
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(o.apiKey ? { authorization: `Bearer ${o.apiKey}` } : {}) },
      body: JSON.stringify({ model: o.model, input: o.text }),
      signal: o.signal,
    });
  } catch (err) {
    if (o.signal.aborted) throw o.signal.reason ?? err;
    throw new CodedError('EMBEDDING_FAILED', `${url}: ${(err as Error).message}`, { cause: err });
  }
  const body = (
    await readCapped(res, MAX_ANSWER_BYTES, () => new CodedError('EMBEDDING_FAILED', `${url}: the answer passed ${MAX_ANSWER_BYTES} bytes`))
  ).toString('utf8');
  if (!res.ok) throw new CodedError('EMBEDDING_FAILED', `${url}: HTTP ${res.status} ${body.slice(0, 200)}`);
  let vector: unknown;
  try {
    vector = (JSON.parse(body) as { data?: Array<{ embedding?: unknown }> }).data?.[0]?.embedding;
  } catch {
    throw new CodedError('EMBEDDING_FAILED', `${url}: the answer is not JSON`);
  }
  if (!Array.isArray(vector) || !vector.length || vector.length > MAX_VECTOR_DIMENSIONS || !vector.every((x) => typeof x === 'number' && Number.isFinite(x)))
    throw new CodedError('EMBEDDING_FAILED', `${url}: the answer has no embedding of 1 to ${MAX_VECTOR_DIMENSIONS} numbers`);
  return vector as number[];
}

/** The agent's embeddings, or undefined without `memory_embedding_model` (or `base_url`); each within `request_timeout_ms`. */
export function embedderFor(agent: AgentConfig, apiKey: string | undefined): Embedder | undefined {
  const model = agent.memory_embedding_model;
  const baseUrl = agent.base_url;
  if (model === undefined || baseUrl === undefined || agent.provider === 'echo') return undefined;
  return (text, signal) =>
    embed({ baseUrl, ...(apiKey ? { apiKey } : {}), model, text, signal: AbortSignal.any([signal, AbortSignal.timeout(agent.request_timeout_ms)]) });
}

/** Cosine similarity; 0 when the lengths differ (a vector from another model) or one is all zeros. */
export function cosine(a: readonly number[], b: readonly number[]): number {
  if (a.length !== b.length) return 0;
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return na && nb ? dot / Math.sqrt(na * nb) : 0;
}
