// `npm start` and `npm pack` run this instead of `npm run build`: it builds only when a source
// file, the bundler script, package.json, the lock file or a tsconfig is newer than the last
// complete build (dist/builds/current, the last thing `npm run build` writes), so a restart
// with nothing changed starts at once instead of after a 10-20 s build.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
const inputs = [
  'src',
  'channels',
  'bin',
  'scripts/bundle.mjs',
  'scripts/copy-assets.mjs',
  'package.json',
  'package-lock.json',
  'tsconfig.json',
  'tsconfig.build.json',
  'tsconfig.plugin-api.json',
];

/** The newest modification time under `path`, in ms (0 when it does not exist). */
function newest(path) {
  let st;
  try {
    st = statSync(path);
  } catch {
    return 0;
  }
  if (!st.isDirectory()) return st.mtimeMs;
  let max = st.mtimeMs;
  for (const name of readdirSync(path)) max = Math.max(max, newest(join(path, name)));
  return max;
}

const built = (() => {
  try {
    return statSync(join(root, 'dist/builds/current')).mtimeMs;
  } catch {
    return 0;
  }
})();
const changed = Math.max(...inputs.map((p) => newest(join(root, p))));
if (built > 0 && changed <= built) {
  console.error('channeld: the build is up to date (nothing changed since the last npm run build); not building');
} else {
  console.error(built ? 'channeld: sources changed since the last build; building' : 'channeld: no complete build yet; building');
  const r = spawnSync('npm', ['run', 'build'], { cwd: root, stdio: 'inherit' });
  process.exit(r.status ?? 1);
}
