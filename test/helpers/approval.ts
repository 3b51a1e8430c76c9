import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import type { FakeLlm, Script } from '../fakes/llm/server.js';
import { FILESYSTEM_BIN, stdioServer } from './mcp.js';

/** A model turn that calls one tool. */
export function callTool(name: string, args: unknown, id = 'call_1'): Script {
  return { kind: 'stream', chunks: [{ toolCalls: [{ id, name, arguments: JSON.stringify(args) }] }] };
}
export const say = (text: string): Script => ({ kind: 'stream', chunks: [{ content: text }] });

/** What the model was told a tool returned, in request `n`. */
export function toolResult(llm: FakeLlm, n: number): string {
  const msg = llm.requests[n]?.body.messages.find((m) => m.role === 'tool');
  return typeof msg?.content === 'string' ? msg.content : JSON.stringify(msg?.content);
}

/**
 * A directory served by server-filesystem with `edit_file` behind approval, and a file whose
 * content counts the runs: each run of the scripted edit turns "ran:" into "ran:I", so a
 * second run would leave "ran:II".
 */
export class CountingFile {
  readonly dir = mkdtempSync(join(tmpdir(), 'channeld-approval-'));
  readonly path = join(this.dir, 'count.txt');

  constructor() {
    writeFileSync(this.path, 'ran:');
  }

  /** The TOML of the filesystem server (in `[[agent.mcp]]` unless told otherwise). */
  server(table = '[[agent.mcp]]'): string {
    return stdioServer('fs', FILESYSTEM_BIN, [this.dir], 'approval = ["edit_file"]', table);
  }

  /** The model's call of the counting edit. */
  edit(id = 'call_1'): Script {
    return callTool('fs__edit_file', { path: this.path, edits: [{ oldText: 'ran:', newText: 'ran:I' }] }, id);
  }

  /** How many times the edit ran. */
  get runs(): number {
    return readFileSync(this.path, 'utf8').length - 'ran:'.length;
  }
}

/** A CountingFile whose directory is removed when the test finishes (after a daemon started later is stopped). */
export function withCountingFile(): CountingFile {
  const file = new CountingFile();
  onTestFinished(() => rmSync(file.dir, { recursive: true, force: true }));
  return file;
}
