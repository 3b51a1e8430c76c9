import { readFileSync } from 'node:fs';

function findVersion(): string {
  for (const rel of ['../../package.json', '../../../package.json']) {
    try {
      return (JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as { version: string }).version;
    } catch {
      /* try the next layout: src/ under tsx, dist/src/ when built */
    }
  }
  return '0.0.0';
}

export const VERSION = findVersion();
