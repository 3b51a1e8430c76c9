import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeLlm } from '../fakes/llm/server.js';
import { waitFor } from '../helpers/daemon.js';
import { DaemonProcess } from '../helpers/process.js';
import { ChatClient } from '../helpers/webchat-client.js';

const web = (id: string) => `[[channels]]\nid = "${id}"\ntype = "webchat"\n`;

function setup(delayMs = 100) {
  const dir = mkdtempSync(join(tmpdir(), 'channeld-proc-'));
  const file = join(dir, 'daemon.config.toml');
  const write = (channels: string, extra = '', agent = `[agent]\nprovider = "echo"\necho_delay_ms = ${delayMs}\n`) =>
    writeFileSync(
      file,
      `[daemon]\nstate_dir = "${join(dir, 'state')}"\nshutdown_grace_ms = 8000\n${extra}\n[http]\nlisten = "127.0.0.1:0"\n\n${agent}\n${channels}`,
    );
  return { dir, file, write };
}

async function status(url: string): Promise<{
  turns: { list: unknown[] };
  generation: number;
  channels: Array<{ id: string; connection: number; state: string }>;
  last_reload: { ok: boolean; errors: string[] } | null;
}> {
  return (await fetch(`${url}/status`)).json() as never;
}

describe('the built daemon as a real process', () => {
  const cleanup: Array<() => void> = [];
  afterEach(() => {
    for (const c of cleanup.splice(0)) c();
  });

  it('reaches /readyz, streams a reply, keeps an unchanged channel across SIGHUP, and finishes a turn on SIGTERM', async () => {
    const s = setup();
    s.write(web('web'));
    const p = new DaemonProcess(s.file);
    cleanup.push(
      () => p.child.kill('SIGKILL'),
      () => rmSync(s.dir, { recursive: true, force: true }),
    );
    const url = await p.url();
    await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200);

    const c = new ChatClient(url, 'tab-1');
    cleanup.push(() => c.close());
    await c.opened;
    c.send('hello there world');
    const [first] = await c.finals();
    expect(first!.text).toBe('hello there world');
    expect(c.replies().filter((f) => f.ref === first!.ref && !f.final).length).toBeGreaterThanOrEqual(2);

    // SIGHUP adding a channel: "web" is unchanged, so its listener and this socket stay.
    s.write(web('web') + web('web2'));
    p.signal('SIGHUP');
    await waitFor(async () => (await status(url)).generation === 2);
    const after = await status(url);
    expect(after.channels.find((ch) => ch.id === 'web')).toMatchObject({ state: 'connected', connection: 1 });
    expect(after.channels.find((ch) => ch.id === 'web2')).toMatchObject({ state: 'connected' });
    c.send('still the same socket');
    expect((await c.finals(2)).map((f) => f.text)).toContain('still the same socket');

    // SIGTERM while a turn streams: the whole answer still lands, then exit 0.
    const long = 'one two three four five six seven eight nine ten';
    c.send(long);
    await waitFor(() => c.replies().some((f) => !f.final && long.startsWith(f.text!) && f.text !== long && f.text!.length > 0 && f.text!.startsWith('one')));
    p.signal('SIGTERM');
    const finals = await c.finals(3);
    expect(finals.map((f) => f.text)).toContain(long);
    expect(await p.exited).toBe(0);
  });

  it('an invalid config on SIGHUP changes nothing and is reported in /status', async () => {
    const s = setup(0);
    s.write(web('web'));
    const p = new DaemonProcess(s.file);
    cleanup.push(
      () => p.child.kill('SIGKILL'),
      () => rmSync(s.dir, { recursive: true, force: true }),
    );
    const url = await p.url();
    await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200);
    writeFileSync(s.file, `[daemon]\nstate_dir = "${join(s.dir, 'state')}"\nbogus = 1\n`);
    p.signal('SIGHUP');
    const st = await waitFor(async () => {
      const v = await status(url);
      return v.last_reload ? v : undefined;
    });
    expect(st.generation).toBe(1);
    expect(st.last_reload!.ok).toBe(false);
    expect(st.last_reload!.errors[0]).toMatch(/daemon\.config\.toml:3:1: daemon\.bogus: unknown key/);
    expect(st.channels).toEqual([expect.objectContaining({ id: 'web', state: 'connected', connection: 1 })]);
    p.signal('SIGTERM');
    expect(await p.exited).toBe(0);
  });

  it('kill -9 mid-turn, start again: the message is answered exactly once, in the draft that already existed', async () => {
    const llm = new FakeLlm();
    await llm.start();
    cleanup.push(() => void llm.close());
    const s = setup();
    s.write(web('web'), '', `[agent]\nprovider = "openai-compatible"\nbase_url = "${llm.url}"\nmodel = "m"\n`);
    const long = 'alpha beta gamma delta epsilon zeta eta theta iota kappa';
    const words = long.split(' ').map((w) => `${w} `);
    // The first process's model writes all but the last word and then stalls: the turn is
    // mid-stream whenever the kill lands, however slow this machine is. The restarted
    // process's request gets the fake's default answer, the whole text.
    llm.script({ kind: 'stall', chunks: words.slice(0, -1).map((content) => ({ content, delayMs: 100 })) });
    const p1 = new DaemonProcess(s.file);
    cleanup.push(
      () => p1.child.kill('SIGKILL'),
      () => rmSync(s.dir, { recursive: true, force: true }),
    );
    const url1 = await p1.url();
    const c1 = new ChatClient(url1, 'tab-crash');
    cleanup.push(() => c1.close());
    await c1.opened;
    c1.send(long);
    // A second frame for the draft is an edit: the draft's id was committed before it.
    const draft = await waitFor(() => c1.replies().find((f, i, all) => all.findIndex((g) => g.ref === f.ref) < i));
    p1.signal('SIGKILL');
    await p1.exited;

    const p2 = new DaemonProcess(s.file);
    cleanup.push(() => p2.child.kill('SIGKILL'));
    const url2 = await p2.url();
    // The same tab reconnects (as the page does) and sees the old draft finished.
    const c2 = new ChatClient(url2, 'tab-crash');
    cleanup.push(() => c2.close());
    await c2.opened;
    const [final] = await c2.finals();
    expect(final).toMatchObject({ ref: draft.ref, text: long });
    // Settled: no turn runs or waits, so nothing can answer again.
    await waitFor(async () => (await status(url2)).turns.list.length === 0);
    expect(new Set(c2.replies().map((f) => f.ref))).toEqual(new Set([draft.ref]));
    expect(llm.requests).toHaveLength(2);
    expect(p2.lines.some((l) => l.msg === 'recovered unfinished messages from the inbox')).toBe(true);
    p2.signal('SIGTERM');
    expect(await p2.exited).toBe(0);
  });
});
