/**
 * Why a request never got an answer, in the operator's words: the system error code and the
 * host (`ENOTFOUND api.example`, `ECONNREFUSED 127.0.0.1:8081`), or `no answer within N ms`.
 * SDKs wrap the socket's error in their own ("Network request for 'getMe' failed!"), so the
 * cause chain (`cause`, grammy's `error`, an AggregateError's `errors`) and the messages on it
 * are searched. Undefined when nothing names a network cause.
 */
export function networkCause(err: unknown, timeoutMs?: number): string | undefined {
  const seen = new Set<unknown>();
  const queue: unknown[] = [err];
  let timedOut = false;
  while (queue.length && seen.size < 12) {
    const e = queue.shift();
    if (!e || typeof e !== 'object' || seen.has(e)) continue;
    seen.add(e);
    const x = e as { code?: unknown; hostname?: unknown; address?: unknown; port?: unknown; message?: unknown; name?: unknown };
    const code = typeof x.code === 'string' && /^E[A-Z_]+$/.test(x.code) ? x.code : undefined;
    if (code && code !== 'ETIMEDOUT') {
      if (typeof x.hostname === 'string') return `${code} ${x.hostname}`;
      if (typeof x.address === 'string') return `${code} ${x.address}${typeof x.port === 'number' ? `:${x.port}` : ''}`;
    }
    // "connect ECONNREFUSED 127.0.0.1:9", "getaddrinfo ENOTFOUND api.example" inside a wrapper's message.
    const said =
      typeof x.message === 'string' ? /\b(E(?:CONNREFUSED|NOTFOUND|AI_AGAIN|CONNRESET|HOSTUNREACH|NETUNREACH|ADDRNOTAVAIL)) ([^\s,;)]+)/.exec(x.message) : null;
    if (said) return `${said[1]} ${said[2]}`;
    if (code === 'ETIMEDOUT' || x.name === 'TimeoutError' || code === 'UND_ERR_CONNECT_TIMEOUT') timedOut = true;
    queue.push(
      (e as { cause?: unknown }).cause,
      (e as { error?: unknown }).error,
      ...(Array.isArray((e as { errors?: unknown }).errors) ? (e as { errors: unknown[] }).errors : []),
    );
  }
  if (timedOut) return timeoutMs ? `no answer within ${timeoutMs} ms` : 'timed out';
  return undefined;
}
