import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * An ES module import of node:http makes Node build its ESM facade, which reads every export
 * (`http.WebSocket` among them) and so loads Node's bundled undici and http2 at start-up:
 * 45-60 ms of CPU the daemon never uses (src/observe/http-server.ts takes node:http with
 * process.getBuiltinModule instead). Checked on the chunks the last `npm run build` wrote.
 */
const bundle = join(import.meta.dirname, '../../../dist/bundle');

describe('the bundle takes node:http as CommonJS', () => {
  it('no chunk imports node:http as an ES module', () => {
    const chunks = readdirSync(bundle).filter((f) => f.endsWith('.js'));
    expect(chunks.length).toBeGreaterThan(0);
    const importers = chunks.filter((f) => /^import\b[^;]*\bfrom\s*["'](node:)?http["'];?$/m.test(readFileSync(join(bundle, f), 'utf8')));
    expect(importers).toEqual([]);
  });
});
