import { randomUUID } from 'node:crypto';
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { checkSize } from '../../src/util/download.js';
import type { Attachment } from '../../src/contracts/message.js';
import { CodedError } from '../../src/contracts/errors.js';
import { readBody, sendJson } from '../../src/util/http.js';
import type { UploadRef } from './protocol.js';

const ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** Uploads older than this are removed: the inbox keeps answered messages 72 h by default. */
export const UPLOAD_RETENTION_MS = 7 * 24 * 3_600_000;

/**
 * Web chat uploads, kept as files under `<state_dir>/uploads/<channel>/<uuid>` (nowhere
 * else: the id is a server-made UUID, checked before any path is built), so a message
 * that waits in the inbox across a restart still has its file.
 */
export class Uploads {
  constructor(
    readonly dir: string,
    private readonly maxBytes: () => number,
  ) {}

  /** `POST /webchat/<id>/upload`: the raw body is the file; `x-file-name` names it. Too large: 413 before the body is read. */
  async receive(req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse): Promise<void> {
    const max = this.maxBytes();
    const body = await readBody(req, max);
    if (body === 'too_large') return sendJson(res, 413, { error: `the file is larger than the ${max}-byte limit ([limits] max_attachment_bytes)` });
    if (!body.length) return sendJson(res, 400, { error: 'the upload is empty' });
    const id = randomUUID();
    await mkdir(this.dir, { recursive: true });
    await writeFile(join(this.dir, id), body);
    const name = decodeURIComponent(String(req.headers['x-file-name'] ?? 'file')).slice(0, 200);
    sendJson(res, 200, { id, name, mime: String(req.headers['content-type'] ?? 'application/octet-stream').split(';')[0], size: body.length });
  }

  /** The uploads a message names, as attachments; unknown ids are left out. */
  async describe(refs: readonly UploadRef[]): Promise<Attachment[]> {
    const out: Attachment[] = [];
    for (const r of refs) {
      if (!ID.test(r.id)) continue;
      const size = await stat(join(this.dir, r.id)).then(
        (s) => s.size,
        () => undefined,
      );
      if (size === undefined) continue;
      out.push({ id: r.id, type: 'upload', size, ...(r.name ? { name: r.name } : {}), ...(r.mime ? { mime: r.mime } : {}) });
    }
    return out;
  }

  async read(a: Attachment, maxBytes: number): Promise<Buffer> {
    const name = a.name ?? 'upload';
    if (!ID.test(a.id)) throw new CodedError('ATTACHMENT_UNAVAILABLE', `${name}: not an upload id`);
    const path = join(this.dir, a.id);
    const size = await stat(path).then(
      (s) => s.size,
      () => undefined,
    );
    if (size === undefined) throw new CodedError('ATTACHMENT_UNAVAILABLE', `${name} is no longer stored`);
    checkSize(name, size, maxBytes);
    return readFile(path);
  }

  /** Removes uploads older than the retention. */
  async prune(nowMs = Date.now()): Promise<void> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    for (const n of names) {
      const p = join(this.dir, n);
      const s = await stat(p).catch(() => undefined);
      if (s && nowMs - s.mtimeMs > UPLOAD_RETENTION_MS) await rm(p, { force: true });
    }
  }
}
