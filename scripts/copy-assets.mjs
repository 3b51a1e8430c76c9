// `npm run build` step: every file under bin/, src/ and channels/ that is not TypeScript
// (a page, its script and style, an icon) is copied to the same place under dist/, next to
// the compiled module that reads it with `new URL('./file', import.meta.url)`. So a channel
// kind or an action ships a static file by putting it in its own folder: no build line
// names it (docs/EXTENDING.md).
import { copyFile, mkdir, readdir } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';

const root = join(import.meta.dirname, '..');
const dist = join(root, 'dist');

/** Every file below `dir` that tsc does not compile. */
async function* assets(dir) {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* assets(path);
    else if (entry.isFile() && !/\.(?:[cm]?ts|tsx)$/.test(entry.name)) yield path;
  }
}

let copied = 0;
for (const top of ['bin', 'src', 'channels']) {
  for await (const file of assets(join(root, top))) {
    const to = join(dist, relative(root, file));
    await mkdir(dirname(to), { recursive: true });
    await copyFile(file, to);
    copied++;
  }
}
if (process.env.CHANNELD_BUILD_VERBOSE) console.log(`copied ${copied} static files into dist/`);
