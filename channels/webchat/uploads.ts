import { randomUUID } from 'node:crypto';
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { checkSize } from '../../src/util/download.js';
import type { Attachment } from '../../src/contracts/message.js';
import { CodedError } from '../../src/contracts/errors.js';
import { readBody, sendJson } from '../../src/util/http-helpers.js';
import type { UploadRef } from './protocol.js';
import type { StorageReporter } from '../../src/contracts/channel.js';

const ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** Uploads older than this are removed: the inbox keeps answered messages 72 h by default. */
export const UPLOAD_RETENTION_MS = 7 * 24 * 3_600_000;

/**
 * Web chat uploads, kept as files under `<state_dir>/uploads/<channel>/<uuid>` (nowhere
 * else: the id is a server-made UUID, checked before any path is built), so a message
 * that waits in the inbox across a restart still has its file.
 */
export class Uploads {
  /** Bytes stored per tab (this run's uploads; the total is counted from the folder). */
  readonly #perTab = new Map<string, number>();
  #total: number | undefined;
  /** Room held by uploads still being received, so concurrent ones cannot pass the quota together. */
  #held = 0;
  readonly #heldPerTab = new Map<string, number>();

  constructor(
    readonly dir: string,
    private readonly maxBytes: () => number,
    /** Bytes all stored uploads may hold together; one tab may use a quarter of it. */
    private readonly quotaBytes: () => number = () => Number.POSITIVE_INFINITY,
    /** Told of an upload refused for lack of room (the disk's ENOSPC/EDQUOT, or the quota): the daemon's storage health counts it. */
    private readonly storage?: StorageReporter,
  ) {}

  /** Bytes stored now, counted from the folder once, then kept up to date. */
  async #stored(): Promise<number> {
    if (this.#total !== undefined) return this.#total;
    let total = 0;
    for (const n of await readdir(this.dir).catch(() => [] as string[])) total += (await stat(join(this.dir, n)).catch(() => undefined))?.size ?? 0;
    this.#total ??= total;
    return this.#total;
  }

  /**
   * `POST /webchat/<id>/upload`: the raw body is the file; `x-file-name` names it. A bad
   * name is 400, a file or a declared length over the limit or the quota 413, before the
   * body is read or anything kept. A disk that refuses the write is 507, with nothing kept.
   * Another site's page (or another local web app) may not store files here (`ownOrigin`,
   * the same Origin rule as the WebSocket and the management POSTs): 403; no access: 401.
   */
  async receive(
    req: import('node:http').IncomingMessage,
    res: import('node:http').ServerResponse,
    tab: string,
    may: { ownOrigin: boolean; authorized: boolean },
  ): Promise<void> {
    if (!may.ownOrigin) {
      req.resume();
      return sendJson(res, 403, { error: "uploads are taken from this daemon's own page only" });
    }
    if (!may.authorized) return void res.writeHead(401).end();
    const name = fileName(req.headers['x-file-name']);
    if (name === undefined) {
      req.resume();
      return sendJson(res, 400, { error: 'x-file-name must be a URI-encoded file name' });
    }
    const max = this.maxBytes();
    const quota = this.quotaBytes();
    const tabQuota = quota / 4;
    const stored = (await this.#stored()) + this.#held;
    const room = Math.min(max, quota - stored, tabQuota - (this.#perTab.get(tab) ?? 0) - (this.#heldPerTab.get(tab) ?? 0));
    if (room < max) {
      const declared = Number(req.headers['content-length'] ?? 0);
      if (room <= 0 || declared > room) {
        req.resume();
        this.#quotaRefused(quota);
        return sendJson(res, 413, {
          error: `the upload quota is used up ([[channels]] upload_quota_bytes = ${quota}, a quarter of it per tab); try again after older uploads expire`,
        });
      }
    }
    const hold = Math.max(0, room);
    this.#held += hold;
    this.#heldPerTab.set(tab, (this.#heldPerTab.get(tab) ?? 0) + hold);
    try {
      await this.#store(req, res, { tab, name, room: hold, max, ...(room < max ? { quota } : {}) });
    } finally {
      this.#held -= hold;
      const left = (this.#heldPerTab.get(tab) ?? 0) - hold;
      if (left > 0) this.#heldPerTab.set(tab, left);
      else this.#heldPerTab.delete(tab);
    }
  }

  /** Reads the body (at most `room` bytes) and keeps it; `quota` is set when the quota, not the file limit, bounds `room`. */
  async #store(
    req: import('node:http').IncomingMessage,
    res: import('node:http').ServerResponse,
    { tab, name, room, max, quota }: { tab: string; name: string; room: number; max: number; quota?: number },
  ): Promise<void> {
    const body = await readBody(req, room);
    if (body === 'too_large') {
      if (quota !== undefined) this.#quotaRefused(quota);
      return sendJson(
        res,
        413,
        quota !== undefined
          ? { error: `the upload quota is used up ([[channels]] upload_quota_bytes = ${quota})` }
          : { error: `the file is larger than the ${max}-byte limit ([limits] max_attachment_bytes)` },
      );
    }
    if (!body.length) return sendJson(res, 400, { error: 'the upload is empty' });
    const id = randomUUID();
    const path = join(this.dir, id);
    try {
      await mkdir(this.dir, { recursive: true });
      await writeFile(path, body);
    } catch (err) {
      // A full or failing disk: the client hears it, and no partial file stays behind.
      await rm(path, { force: true }).catch(() => {});
      const code = (err as NodeJS.ErrnoException).code ?? 'EIO';
      if (code === 'ENOSPC' || code === 'EDQUOT') this.storage?.report(err as Error & { code: string });
      return sendJson(res, 507, { error: `the upload could not be stored (${code}); try again later` });
    }
    this.#total = (await this.#stored()) + body.length;
    this.#perTab.set(tab, (this.#perTab.get(tab) ?? 0) + body.length);
    sendJson(res, 200, { id, name, mime: String(req.headers['content-type'] ?? 'application/octet-stream').split(';')[0], size: body.length });
  }

  #quotaRefused(quota: number): void {
    this.storage?.report(Object.assign(new Error(`the upload quota is used up (upload_quota_bytes = ${quota})`), { code: 'QUOTA' }));
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

  /** Removes uploads older than the retention; the quota is counted anew. */
  async prune(nowMs = Date.now()): Promise<void> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    for (const n of names) {
      const p = join(this.dir, n);
      const s = await stat(p).catch(() => undefined);
      if (s && nowMs - s.mtimeMs > UPLOAD_RETENTION_MS) await rm(p, { force: true });
    }
    this.#total = undefined;
    this.#perTab.clear();
  }
}

/** The decoded `x-file-name` (default "file"), or undefined when it is not valid percent-encoding. */
function fileName(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return 'file';
  try {
    const name = decodeURIComponent(String(header)).slice(0, 200);
    return name.trim() ? name : 'file';
  } catch {
    return undefined;
  }
}
