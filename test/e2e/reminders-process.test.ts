import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { FIXTURE_ENTRY, TSX_NODE_ARGS } from '../helpers/fixture-entry.js';
import { withDaemonProcess } from '../helpers/process.js';
import type { PostboxReply } from '../fixtures/channels/postbox/adapter.js';

const KEY = 'k-reminders-1';
const auth = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };

/**
 * Chat reminders against real daemon processes on one state directory (the test-only
 * postbox kind): a reminder set just before a kill -9 is posted once by the next process,
 * and a process started after the firing (another kill -9) does not post it again.
 */
describe('/remind in a real daemon process', () => {
  const dir = mkdtempSync(join(tmpdir(), 'channeld-reminders-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'daemon.config.toml');
  writeFileSync(
    file,
    `[daemon]\nstate_dir = "${join(dir, 'state')}"\nshutdown_grace_ms = 2000\n\n[http]\nlisten = "127.0.0.1:0"\n\n[agent]\nprovider = "echo"\necho_delay_ms = 5\n\n[[channels]]\nid = "lb"\ntype = "postbox"\nallow_from = ["*"]\nkey_env = "LB_KEY"\npath = "/lb"\n`,
  );

  /** How many postbox message ids the processes so far have stored. */
  let used = 0;

  async function start() {
    const p = withDaemonProcess(file, { LB_KEY: KEY }, TSX_NODE_ARGS, FIXTURE_ENTRY);
    const url = await p.url(30_000);
    await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, 30_000);
    const replies = async () => (await (await fetch(`${url}/lb/lb/replies`, { headers: auth })).json()) as PostboxReply[];
    // The postbox kind numbers messages per process (m1, m2, ...) and a duplicate is dropped
    // without a word, so a new process first posts past the ids earlier processes stored.
    let local = 0;
    const post = (text: string) =>
      fetch(`${url}/lb/lb/messages`, { method: 'POST', headers: auth, body: JSON.stringify({ chat: 'c1', sender: 'ann', text }) }).then((r) => r.json());
    const say = async (text: string): Promise<string> => {
      const before = (await replies()).length;
      for (; local < used; local++) await post('(an id already stored)');
      await post(text);
      used = ++local;
      return waitFor(async () => (await replies()).slice(before).find((r) => r.final && !r.text.startsWith('⏰'))?.text, 20_000);
    };
    return { p, replies, say };
  }

  it('posts a reminder set before a kill -9 once, and never again after another kill -9', async () => {
    const first = await start();
    expect(await first.say('/remind in 1h water the plants')).toMatch(/^Reminder 1 set for .+ \(daemon time\): water the plants$/);
    expect(await first.say('/reminders')).toMatch(/^1 · .+ · water the plants$/);
    expect(await first.say('/remind in 3s stand up')).toMatch(/^Reminder 2 set for .+: stand up$/);
    // Nothing was posted before the kill.
    expect((await first.replies()).filter((r) => r.text.startsWith('⏰'))).toEqual([]);
    first.p.signal('SIGKILL');
    await first.p.exited;

    const second = await start();
    const fired = await waitFor(async () => (await second.replies()).find((r) => r.final && r.text.startsWith('⏰')), 30_000);
    expect(fired.text).toBe('⏰ @ann: stand up');
    // A round trip after the firing: still one reminder post, and the other one still pending.
    expect(await second.say('/reminders')).toMatch(/^1 · .+ · water the plants$/);
    expect(await second.say('/reminders cancel 1')).toBe('Reminder 1 cancelled.');
    expect(await second.say('/reminders cancel 2')).toBe('This conversation has no pending reminder 2.');
    expect(await second.say('/reminders')).toBe('No reminders in this conversation.');
    expect((await second.replies()).filter((r) => r.text.startsWith('⏰'))).toHaveLength(1);
    second.p.signal('SIGKILL');
    await second.p.exited;

    const third = await start();
    expect(await third.say('/remind in 3 days')).toBe('"3" is not a duration; write e.g. 30s, 10m, 1h30m or 2d.');
    expect(await third.say('hello')).toBe('hello');
    expect((await third.replies()).filter((r) => r.text.startsWith('⏰'))).toEqual([]);
    third.p.signal('SIGTERM');
    expect(await third.p.exited).toBe(0);
  });
});
