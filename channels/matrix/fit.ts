/**
 * A Matrix event may hold 65,536 bytes with the homeserver's own fields; ours keep under this.
 * An edit carries its text twice (fallback and m.new_content), each as Markdown and HTML, so
 * a message at the length limit in a script of 3-byte characters would not fit as it is.
 */
export const MAX_CONTENT_BYTES = 60_000;

const bytes = (c: unknown) => Buffer.byteLength(JSON.stringify(c));

function plain(c: Record<string, unknown>): Record<string, unknown> {
  const { format: _format, formatted_body: _html, ...rest } = c;
  return rest;
}

/**
 * `content` made to fit: first an edit's fallback shrinks to a short plain line (clients
 * that know edits show m.new_content), then the HTML goes and the text stays plain.
 */
export function fitContent(content: Record<string, unknown>): Record<string, unknown> {
  if (bytes(content) <= MAX_CONTENT_BYTES) return content;
  let c = content;
  const next = c['m.new_content'] as Record<string, unknown> | undefined;
  if (next) {
    c = { ...plain(c), body: `* ${String(next.body).slice(0, 500)}…` };
    if (bytes(c) <= MAX_CONTENT_BYTES) return c;
    c = { ...c, 'm.new_content': plain(next) };
  } else c = plain(c);
  return c;
}
