import { request } from 'node:http';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { networkCause } from '../../../src/util/network-cause.js';

/** A port nothing listens on: bound, then closed, and only used by this test file's own request. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as { port: number };
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

const failOf = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e,
  );

describe('networkCause names the host and the cause', () => {
  it('connection refused, through fetch and through a wrapper that only keeps the message', async () => {
    const port = await closedPort();
    const viaFetch = await failOf(fetch(`http://127.0.0.1:${port}/getMe`));
    expect(networkCause(viaFetch)).toBe(`ECONNREFUSED 127.0.0.1:${port}`);
    const viaHttp = await failOf(new Promise((_, reject) => request(`http://127.0.0.1:${port}/`).on('error', reject).end()));
    // An SDK's wrapper (grammy's HttpError keeps the socket's error as `error`).
    const wrapped = Object.assign(new Error("Network request for 'getMe' failed!"), { error: viaHttp });
    expect(networkCause(wrapped)).toBe(`ECONNREFUSED 127.0.0.1:${port}`);
    expect(networkCause(new Error(`request to http://x/getMe failed, reason: connect ECONNREFUSED 127.0.0.1:${port}`))).toBe(`ECONNREFUSED 127.0.0.1:${port}`);
  });

  it('a name that does not resolve', async () => {
    const err = await failOf(fetch('http://api.example.invalid/getMe'));
    // ENOTFOUND with a resolver, EAI_AGAIN without one: either way the host is named.
    expect(networkCause(err)).toMatch(/^(ENOTFOUND|EAI_AGAIN) api\.example\.invalid$/);
  });

  it('a timeout says how long was waited; anything else is not a network cause', () => {
    const timeout = Object.assign(new Error('The operation was aborted due to timeout'), { name: 'TimeoutError' });
    expect(networkCause(timeout, 5000)).toBe('no answer within 5000 ms');
    expect(networkCause(new Error('bad request'))).toBeUndefined();
  });
});
