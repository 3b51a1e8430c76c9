import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { DaemonProcess } from '../helpers/process.js';
import { ChatClient } from '../helpers/webchat-client.js';

const logbook = join(import.meta.dirname, '../fixtures/plugins/logbook');

/** The logbook fixture's message hooks in a real daemon (built dist/), over webchat. */
describe('message hooks from a plugin folder', () => {
  let dir: string;
  let book: string;
  let p: DaemonProcess;
  let c: ChatClient;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'channeld-message-hooks-'));
    book = join(dir, 'logbook.jsonl');
    const file = join(dir, 'daemon.config.toml');
    writeFileSync(
      file,
      `[daemon]\nstate_dir = "${join(dir, 'state')}"\nplugins = ["${logbook}"]\n\n[http]\nlisten = "127.0.0.1:0"\n\n[agent]\nprovider = "echo"\necho_delay_ms = 0\n\n[[channels]]\nid = "web"\ntype = "webchat"\n`,
    );
    p = new DaemonProcess(file, { LOGBOOK_FILE: book });
    c = new ChatClient(await p.url(), 'tab');
    await c.opened;
  });
  afterAll(async () => {
    c?.close();
    p?.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  const entries = () =>
    existsSync(book)
      ? readFileSync(book, 'utf8')
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as Record<string, unknown>)
      : [];

  async function ask(text: string): Promise<string> {
    const before = c.replies().filter((f) => f.final).length;
    c.send(text);
    return (await c.finals(before + 1, 15_000))[before]!.text!;
  }

  it('message_received and message_sent see every message in and out', async () => {
    expect(await ask('hello sailor')).toBe('hello sailor');
    await waitFor(() => entries().some((e) => e.out === 'hello sailor'));
    expect(entries()).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ in: 'hello sailor', addressed: true, verdict: 'accepted' }),
        expect.objectContaining({ out: 'hello sailor' }),
      ]),
    );
  });

  it("a hook that throws or never finishes is logged with its plugin's name; the replies still come", async () => {
    expect(await ask('capsize')).toBe('capsize');
    expect(await ask('becalmed')).toBe('becalmed');
    const line = (re: RegExp) => p.lines.find((l) => l.plugin === 'logbook' && re.test(String(l.msg)));
    await waitFor(() => line(/squall threw in message_received: the boat capsized/) && line(/squall threw in message_received: did not finish within 200 ms/));
    expect(line(/the boat capsized/)).toMatchObject({ level: 50, kind: 'hook', name: 'squall', phase: 'message_received' });
    // The other hooks ran for those messages as for any.
    await waitFor(() => entries().some((e) => e.out === 'becalmed'));
    expect(entries().filter((e) => e.in === 'capsize' || e.in === 'becalmed')).toHaveLength(2);
  });
});
