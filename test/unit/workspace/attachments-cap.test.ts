import { describe, expect, it } from 'vitest';
import type { Attachment } from '../../../src/contracts/message.js';
import { MAX_ATTACHMENTS_READ, registerAttachments } from '../../../src/workspace/attachments.js';
import { userMessage } from '../../helpers/recording-adapter.js';
import { bareRuntime, request, sink } from '../../helpers/runtime.js';

describe('attachments: how many one turn reads', () => {
  // A self-hosted server (or a collected turn) can list any number of files; each one read
  // is downloaded and held in memory until the model call. Only the first ten are.
  it(`reads the first ${MAX_ATTACHMENTS_READ} files of a message, names the rest, and says so once`, async () => {
    const { runtime, runner } = bareRuntime();
    registerAttachments(runtime, {
      agent: () => ({ model: 'm', provider: 'echo' }) as never,
      models: () => ({}),
      maxBytes: () => 1_000_000,
      timeoutMs: () => 5_000,
    });
    const files: Attachment[] = Array.from({ length: 25 }, (_, i) => ({ id: `f${i}`, type: 'document', name: `f${i}.txt`, mime: 'text/plain' }));
    const downloaded: string[] = [];
    const reply = sink();
    const outcome = await runtime.run(
      request('read these', reply, {
        message: { ...userMessage('t', 'read these'), attachments: files },
        download: async (a) => {
          downloaded.push(a.id);
          return Buffer.from(`contents of ${a.id}`);
        },
      }),
    );
    expect(outcome.ending).toBe('done');
    expect(downloaded).toEqual(files.slice(0, MAX_ATTACHMENTS_READ).map((f) => f.id));
    expect(runner.inputs[0]!.text).toContain('contents of f9');
    expect(runner.inputs[0]!.text).toContain(
      `[attachment: f10.txt (text/plain, size unknown); not read: only the first ${MAX_ATTACHMENTS_READ} files of a message are]`,
    );
    expect(reply.text().match(/Only the first 10 files were read/g)).toHaveLength(1);
  });
});
