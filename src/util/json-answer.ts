/**
 * The body of an HTTP answer expected to be JSON, read within `maxBytes`: a declared length
 * over it is refused before reading, a body that grows past it is cut off there. Returns the
 * text, and the parsed value or undefined when the text is not JSON. For REST clients that
 * read a platform's error objects as well as its results.
 */
export async function readJsonAnswer(res: Response, maxBytes: number): Promise<{ text: string; json: unknown } | 'too_large'> {
  const declared = Number(res.headers.get('content-length') ?? 0);
  if (declared > maxBytes) {
    await res.body?.cancel().catch(() => {});
    return 'too_large';
  }
  const parts: Uint8Array[] = [];
  let total = 0;
  if (res.body) {
    const reader = res.body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        total += value.byteLength;
        if (total > maxBytes) return 'too_large';
        parts.push(value);
      }
    } finally {
      await reader.cancel().catch(() => {});
    }
  }
  const text = Buffer.concat(parts).toString('utf8');
  try {
    return { text, json: text ? JSON.parse(text) : {} };
  } catch {
    return { text, json: undefined };
  }
}
