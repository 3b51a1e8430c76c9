/** Browser → daemon. `id` is unique per tab, so a resend after a reconnect is deduplicated. */
export type ClientFrame = { type: 'message'; id: string; text: string };

/** Daemon → browser. A reply `ref` is created once and then replaced on every edit. */
export type ServerFrame =
  | { type: 'ack'; id: string }
  /** `buttons` (approval questions): a click sends `data` as the tab's next message; an edit drops them. */
  | { type: 'reply'; ref: string; text: string; final: boolean; buttons?: Array<{ label: string; data: string }> }
  | { type: 'delete'; ref: string }
  | { type: 'typing' }
  | { type: 'error'; message: string };

export function parseClientFrame(data: string): ClientFrame | undefined {
  try {
    const f = JSON.parse(data) as Partial<ClientFrame>;
    if (f.type === 'message' && typeof f.id === 'string' && f.id.length <= 128 && typeof f.text === 'string') return { type: 'message', id: f.id, text: f.text };
  } catch {
    /* not JSON: refused below */
  }
  return undefined;
}
