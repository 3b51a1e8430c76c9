/** A file the browser uploaded first (`POST /webchat/<id>/upload`), named by the id it got back. */
export interface UploadRef {
  id: string;
  name?: string;
  mime?: string;
}

/**
 * Browser → daemon. `id` is unique per tab, so a resend after a reconnect is deduplicated.
 * `attachments` are uploads; with them the text may be empty.
 */
export type ClientFrame = { type: 'message'; id: string; text: string; attachments?: UploadRef[] };

/** Daemon → browser. A reply `ref` is created once and then replaced on every edit. */
export type ServerFrame =
  | { type: 'ack'; id: string }
  /** The user's own message, replayed to a reloaded tab (or another socket of it) in order with the replies. */
  | { type: 'message'; id: string; text: string }
  /** `buttons` (approval questions): a click sends `data` as the tab's next message; an edit drops them. */
  | { type: 'reply'; ref: string; text: string; final: boolean; buttons?: Array<{ label: string; data: string }> }
  | { type: 'delete'; ref: string }
  | { type: 'typing' }
  /** `id`: the message refused (not taken; the page offers to send it again), absent for a frame that could not be read. */
  | { type: 'error'; message: string; id?: string };

export const MAX_UPLOADS_PER_MESSAGE = 10;

export function parseClientFrame(data: string): ClientFrame | undefined {
  try {
    const f = JSON.parse(data) as Partial<ClientFrame>;
    if (f.type === 'message' && typeof f.id === 'string' && f.id.length <= 128 && typeof f.text === 'string') {
      const uploads = Array.isArray(f.attachments)
        ? f.attachments.filter((a): a is UploadRef => typeof a?.id === 'string').slice(0, MAX_UPLOADS_PER_MESSAGE)
        : [];
      return {
        type: 'message',
        id: f.id,
        text: f.text,
        ...(uploads.length
          ? {
              attachments: uploads.map((a) => ({
                id: a.id,
                ...(typeof a.name === 'string' ? { name: a.name.slice(0, 200) } : {}),
                ...(typeof a.mime === 'string' ? { mime: a.mime.slice(0, 100) } : {}),
              })),
            }
          : {}),
      };
    }
  } catch {
    /* not JSON: refused below */
  }
  return undefined;
}

/** A reply's buttons as the page gets them (none: no key). */
export function buttonsFrame(buttons: ReadonlyArray<{ label: string; data: string }> | undefined): { buttons?: Array<{ label: string; data: string }> } {
  return buttons?.length ? { buttons: buttons.map((b) => ({ label: b.label, data: b.data })) } : {};
}
