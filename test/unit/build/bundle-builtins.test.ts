import { describe, expect, it } from 'vitest';
import { bundleChunks, chunkText } from '../../helpers/bundle.js';

/**
 * Start-up cost the bundle must not carry. An ES module import of node:http makes Node build its ESM facade, which reads every export
 * (`http.WebSocket` among them) and so loads Node's bundled undici and http2 at start-up:
 * 45-60 ms of CPU the daemon never uses (src/observe/http-server.ts takes node:http with
 * process.getBuiltinModule instead). Checked on the chunks the last `npm run build` wrote.
 */
/**
 * The chunks every start loads: what the entry imports (it imports the CLI with import() once
 * the compile cache is on, so its dynamic imports count too), and their static imports.
 */
function startupChunks(): Set<string> {
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = chunkText(file);
    for (const m of text.matchAll(/^import\b[^;]*?["']\.\/([^"']+)["'];?$/gm)) visit(m[1]!);
  };
  const entry = chunkText('channeld.js');
  seen.add('channeld.js');
  for (const m of entry.matchAll(/\bimport\(\s*["']\.\/([^"']+)["']\s*\)|^import\b[^;]*?["']\.\/([^"']+)["'];?$/gm)) visit((m[1] ?? m[2])!);
  return seen;
}

describe('what the bundle loads at start-up', () => {
  it('no chunk imports node:http as an ES module', () => {
    const chunks = bundleChunks();
    expect(chunks.length).toBeGreaterThan(0);
    const importers = chunks.filter((f) => /^import\b[^;]*\bfrom\s*["'](node:)?http["'];?$/m.test(chunkText(f)));
    expect(importers).toEqual([]);
  });

  it('the page reader (linkedom, Readability) is not among the chunks loaded at start-up', () => {
    const loaded = [...startupChunks()];
    expect(loaded.length).toBeGreaterThan(1);
    const carrying = loaded.filter((f) => /node_modules\/(linkedom|@mozilla\/readability)\//.test(chunkText(f)));
    expect(carrying).toEqual([]);
  });

  it("Bolt's Express receiver (express, body-parser, mime-db) is in no chunk: the Slack channel takes Bolt's App from its own module", () => {
    const chunks = bundleChunks();
    const carrying = chunks.filter((f) => /node_modules\/(express|body-parser)\//.test(chunkText(f)));
    expect(carrying).toEqual([]);
  });
});
