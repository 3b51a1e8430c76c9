// `npm run build` ends here: the compiled daemon (dist/src, dist/channels) and the packages it
// imports bundled into dist/bundle/channeld.js plus chunks that load on demand (each platform SDK,
// the AI SDK, MCP), the way `npm start` and the systemd unit run it. One file per chunk instead
// of ~190 modules and ~150 CommonJS files: start-up spends less CPU finding, reading and
// linking modules (`npm run bench` measures it against dist/bin/channeld.js, which stays
// usable and is what the CLI's management commands and the tests run).
import { build } from 'esbuild';
import { readFile, rm } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';

const root = join(import.meta.dirname, '..');
const outdir = join(root, 'dist/bundle');

/**
 * Modules read files next to themselves (`new URL('./page.html', import.meta.url)`): in the
 * bundle `import.meta.url` is the chunk's, so each use is rewritten to the URL the module had
 * in dist/, relative to the chunk, which keeps working wherever dist/ is installed.
 */
const moduleUrls = {
  name: 'module-urls',
  setup(b) {
    b.onLoad({ filter: /[\\/]dist[\\/](src|channels|bin)[\\/].*\.js$/ }, async (args) => {
      let contents = await readFile(args.path, 'utf8');
      // Only import.meta.url is rewritten: a module using dirname or filename would silently
      // get the chunk's, so the build stops and says which module.
      if (/import\.meta\.(dirname|filename)/.test(contents))
        throw new Error(`${args.path}: use new URL(…, import.meta.url) instead of import.meta.dirname or filename (the bundle rewrites only import.meta.url)`);
      if (contents.includes('import.meta.url')) {
        const rel = relative(outdir, args.path).split('\\').join('/');
        contents = contents.replaceAll('import.meta.url', `new URL(${JSON.stringify(rel)}, import.meta.url).href`);
      }
      return { contents, loader: 'js', resolveDir: dirname(args.path) };
    });
  },
};

await rm(outdir, { recursive: true, force: true });
await build({
  entryPoints: { channeld: join(root, 'dist/bin/channeld.js') },
  outdir,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node22',
  // Packages check classes by name (node-fetch takes a signal only if its constructor is
  // named "AbortSignal"; grammy hands it the abort-controller package's): keep the names that
  // bundling would otherwise change to avoid collisions.
  keepNames: true,
  // A native addon (found through its package at run time), optional native speed-ups the
  // SDKs try to require and run without, and the pretty printer only a terminal loads.
  external: ['better-sqlite3', 'zlib-sync', 'bufferutil', 'utf-8-validate', '@discordjs/opus', 'erlpack', 'pino-pretty'],
  // CommonJS packages inside an ES module bundle still call require() for Node's built-ins.
  banner: { js: "import { createRequire as __channeldRequire } from 'node:module'; const require = __channeldRequire(import.meta.url);" },
  plugins: [moduleUrls],
  logLevel: 'warning',
});
