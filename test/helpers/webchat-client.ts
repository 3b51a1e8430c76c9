import WebSocket from 'ws';
import { scaled } from './timing.js';

export interface Frame {
  type: string;
  ref?: string;
  text?: string;
  final?: boolean;
  id?: string;
  message?: string;
  buttons?: Array<{ label: string; data: string }>;
}

/** A web chat tab driven by a test: sends messages, records every frame. */
export class ChatClient {
  readonly frames: Frame[] = [];
  readonly #ws: WebSocket;
  readonly opened: Promise<void>;
  /** Resolves with the close code once the server (or close()) closed the socket. */
  readonly closed: Promise<number>;
  #seq = 0;

  constructor(url: string, tab: string, token?: string, path = '/chat') {
    const q = new URLSearchParams({ tab, ...(token ? { token } : {}) });
    this.#ws = new WebSocket(`${url.replace(/^http/, 'ws')}${path}?${q}`);
    this.#ws.on('message', (d) => this.frames.push(JSON.parse(String(d)) as Frame));
    this.closed = new Promise((resolve) => this.#ws.once('close', (code) => resolve(code)));
    this.opened = new Promise((resolve, reject) => {
      this.#ws.once('open', () => resolve());
      this.#ws.once('error', reject);
      this.#ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    });
  }

  send(text: string, id = `m${++this.#seq}`, attachments?: Array<{ id: string; name?: string; mime?: string }>): string {
    this.#ws.send(JSON.stringify({ type: 'message', id, text, ...(attachments ? { attachments } : {}) }));
    return id;
  }

  /** Reply frames (sends and edits) in arrival order. */
  replies(): Frame[] {
    return this.frames.filter((f) => f.type === 'reply');
  }

  /** Resolves with the final frames once `count` replies are final (`timeoutMs` is stretched by the time scale). */
  async finals(count = 1, timeoutMs = 10_000): Promise<Frame[]> {
    const deadline = Date.now() + scaled(timeoutMs);
    for (;;) {
      const latest = new Map<string, Frame>();
      for (const f of this.replies()) latest.set(f.ref!, f);
      const finals = [...latest.values()].filter((f) => f.final);
      if (finals.length >= count) return finals;
      if (Date.now() > deadline) throw new Error(`only ${finals.length}/${count} final replies: ${JSON.stringify(this.frames.slice(-5))}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  close(): void {
    this.#ws.close();
  }
}

/** What a tab shows: its frames as [type, text(, final)] (typing frames left out). */
export const seen = (frames: Frame[]) =>
  frames.filter((f) => f.type !== 'typing').map((f) => (f.type === 'reply' ? [f.type, f.text?.trimEnd(), f.final] : [f.type, f.text]));
