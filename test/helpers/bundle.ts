import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The bundle the last `npm run build` wrote (the dist/bundle link), which the build tests check. */
export const bundleDir = join(import.meta.dirname, '../../dist/bundle');

/** The bundle's chunk files by name, the entry (channeld.js) among them. */
export function bundleChunks(): string[] {
  return readdirSync(bundleDir).filter((f) => f.endsWith('.js'));
}

/** One chunk's text. */
export function chunkText(file: string): string {
  return readFileSync(join(bundleDir, file), 'utf8');
}
