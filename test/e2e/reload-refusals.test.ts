import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { TestDaemon } from '../helpers/daemon.js';
import { withDaemon } from '../helpers/fixtures.js';

const body = `[agent]\nprovider = "echo"\n\n[[channels]]\nid = "web"\ntype = "webchat"\n`;

describe('reloads that must not be applied', () => {
  let d: TestDaemon | undefined;

  it.each([
    ['an empty file', ''],
    ['a comment-only file', '# emptied by mistake\n'],
    ['every channel disabled', `[[channels]]\nid = "web"\ntype = "webchat"\nenabled = false\n`],
  ])('%s would stop every channel: refused with why, channels keep running', async (_what, next) => {
    d = await withDaemon(body);
    d.rewrite(next);
    const r = await d.daemon.reload();
    expect(r.ok).toBe(false);
    expect(r.errors.join('\n')).toMatch(/no channel is enabled in the new config, so this reload would stop every channel/);
    expect(d.daemon.status()).toMatchObject({ generation: 1, last_reload: { ok: false }, channels: [{ id: 'web', state: 'connected' }] });
    expect(d.logs.text).toContain('would stop every channel');
  });

  it('a changed [http] listen or [daemon] state_dir is refused, naming the keys that need a restart', async () => {
    d = await withDaemon(body);
    const source = readFileSync(d.configFile, 'utf8');
    writeFileSync(d.configFile, source.replace('listen = "127.0.0.1:0"', 'listen = "127.0.0.1:1"').replace(/state_dir = "([^"]+)"/, 'state_dir = "$1-moved"'));
    const r = await d.daemon.reload();
    expect(r.ok).toBe(false);
    expect(r.errors[0]).toContain('[http] listen and [daemon] state_dir changed');
    expect(r.errors[0]).toContain('restart');
    expect(d.daemon.status()).toMatchObject({ generation: 1, last_reload: { ok: false } });
    // Only the listen address changed: the same refusal, for that key alone.
    writeFileSync(d.configFile, source.replace('listen = "127.0.0.1:0"', 'listen = "127.0.0.1:1"'));
    expect((await d.daemon.reload()).errors[0]).toMatch(/: \[http\] listen changed; it takes effect only on a restart/);
    // Unchanged again: applied.
    writeFileSync(d.configFile, source);
    expect(await d.daemon.reload()).toMatchObject({ ok: true, generation: 2 });
  });

  it('a dry run (check --against-daemon) reports the refusal a real reload would give, and applies nothing', async () => {
    d = await withDaemon(body);
    const source = readFileSync(d.configFile, 'utf8');
    writeFileSync(d.configFile, source.replace(/state_dir = "([^"]+)"/, 'state_dir = "$1-moved"'));
    const dry = await d.daemon.reload({ dryRun: true });
    expect(dry).toMatchObject({ ok: false, dry_run: true });
    expect(dry.errors[0]).toMatch(/: \[daemon\] state_dir changed; it takes effect only on a restart/);
    d.rewrite(`[[channels]]\nid = "web"\ntype = "webchat"\nenabled = false\n`);
    expect((await d.daemon.reload({ dryRun: true })).errors.join('\n')).toMatch(/would stop every channel/);
    expect(d.daemon.status()).toMatchObject({ generation: 1, channels: [{ id: 'web', state: 'connected' }] });
  });
});
