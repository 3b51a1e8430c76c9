// `npm run build` ends here: the compiled daemon (dist/src, dist/channels) and the packages it
// imports bundled into one entry plus chunks that load on demand (each platform SDK, the AI SDK,
// MCP), the way `npm start` and the systemd unit run it. One file per chunk instead of ~190
// modules and ~150 CommonJS files: start-up spends less CPU finding, reading and linking
// modules (`npm run bench` measures it against dist/bin/channeld.js, which stays usable and is
// what the CLI's management commands and the tests run).
//
// Each build goes to its own folder, dist/builds/<id>/, and dist/bundle is switched to it
// atomically (a symlink renamed over the old one). Node runs a script by its real path, so a
// daemon started as dist/bundle/channeld.js keeps loading its chunks from its own build after
// an upgrade rebuilt: a reload that starts a channel between the build and the restart works.
// The newest KEEP builds are kept; a daemon older than that must be restarted.
import { build } from 'esbuild';
import { lstat, readdir, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';

const root = join(import.meta.dirname, '..');
/** Where builds/ and the bundle link live: dist/, or elsewhere for a test of the switch. */
const dist = process.env.CHANNELD_BUNDLE_DIR ?? join(root, 'dist');
const KEEP = 3;
const id = `${new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '')}-${process.pid}`;
const outdir = join(dist, 'builds', id);

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

/**
 * zod's error messages in 64 languages (half of its 770 KB) are reachable from its `z`
 * namespace (`z.locales`), so bundling cannot leave them out, and every start reads and
 * links them. channeld reports in English only (zod's default, its `en` locale): the
 * bundle's copy of zod's locale index lists only that one.
 */
const zodEnglishOnly = {
  name: 'zod-english-only',
  setup(b) {
    b.onLoad({ filter: /[\\/]node_modules[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/ }, (args) => ({
      contents: 'export { default as en } from "./en.js";\n',
      loader: 'js',
      resolveDir: dirname(args.path),
    }));
  },
};

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
  // bundling would otherwise change to avoid collisions (see cheaperNames below).
  keepNames: true,
  // A native addon (found through its package at run time), optional native speed-ups the
  // SDKs try to require and run without, the pretty printer only a terminal loads, and the
  // YAML parser only a SKILL.md needs (src/workspace/skills.ts loads it then, from its package).
  external: ['better-sqlite3', 'zlib-sync', 'bufferutil', 'utf-8-validate', '@discordjs/opus', 'erlpack', 'pino-pretty', 'yaml'],
  // CommonJS packages inside an ES module bundle still call require() for Node's built-ins.
  // CHANNELD_BUILD_NOTE marks a build (a test makes two builds differ with it).
  banner: {
    js: `${process.env.CHANNELD_BUILD_NOTE ? `// ${process.env.CHANNELD_BUILD_NOTE.replace(/\n/g, ' ')}\n` : ''}import { createRequire as __channeldRequire } from 'node:module'; const require = __channeldRequire(import.meta.url);`,
  },
  plugins: [moduleUrls, zodEnglishOnly],
  logLevel: 'warning',
});

// keepNames wraps every named function the bundle creates in esbuild's __name helper, which
// defines its "name" property: closures made per message included, a defineProperty and a
// descriptor each (about 5 % of the daemon's CPU per message). What packages check by name are
// constructors (classes and plain functions, which have a prototype); arrow functions, async
// functions and methods have none and now keep the name JavaScript gave them, which a
// renamed one only loses in a stack trace. The build stops if esbuild's helper changes.
const nameHelper = 'var __name = (target, value) => __defProp(target, "name", { value, configurable: true });';
const cheaperNames =
  'var __name = (target, value) => (typeof target === "function" && target.prototype === void 0 ? target : __defProp(target, "name", { value, configurable: true }));';
// esbuild escapes every non-ASCII character in code (its default charset) but copies comments
// as they are, and one "→" in a comment makes V8 hold the whole chunk's source as a two-byte
// string: twice the memory for as long as the daemon runs, and the ES module loader's slower
// UTF-8 path at every start. What is left after esbuild is in comments (plain text there);
// escaped as \uXXXX (UTF-16 units, as JSON does) it would mean the same character even in a
// string, a template or a regular expression.
const nonAscii = /[\u0080-\uffff]/g;
const escapeUnit = (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
let helpers = 0;
for (const file of await readdir(outdir)) {
  if (!file.endsWith('.js')) continue;
  const text = await readFile(join(outdir, file), 'utf8');
  let out = text;
  if (out.includes(nameHelper)) {
    helpers++;
    out = out.replace(nameHelper, cheaperNames);
  }
  out = out.replace(nonAscii, escapeUnit);
  if (out !== text) await writeFile(join(outdir, file), out);
}
if (helpers === 0) throw new Error(`esbuild's __name helper was not found in ${outdir}: scripts/bundle.mjs must be updated to its new form`);

// The switch: a new link renamed over the old one, so dist/bundle is always one whole build.
const link = join(dist, 'bundle');
const existing = await lstat(link).catch(() => undefined);
if (existing && !existing.isSymbolicLink()) await rm(link, { recursive: true, force: true }); // the layout before builds/
const next = `${link}.next-${process.pid}`;
await symlink(join('builds', id), next);
await rename(next, link);
await writeFile(join(dist, 'builds', 'current'), `${id}\n`);

const builds = (await readdir(join(dist, 'builds'), { withFileTypes: true })).filter((d) => d.isDirectory()).map((d) => d.name);
for (const old of builds.sort().slice(0, -KEEP)) if (old !== id) await rm(join(dist, 'builds', old), { recursive: true, force: true });
