import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '../../..');

/** Every .ts file under `dir`, with its comments removed (a comment may contrast the two words). */
function code(dir: string): Array<{ file: string; text: string }> {
  return readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => join(e.parentPath, e.name))
    .map((f) => ({
      file: relative(root, f),
      text: readFileSync(f, 'utf8')
        .replace(/\/\*[\s\S]*?\*\//g, '')
        .replace(/^\s*\/\/.*$/gm, ''),
    }));
}

/** `file: match` for every match of `re` (global) in `files`. */
function hits(files: Array<{ file: string; text: string }>, re: RegExp): string[] {
  return files.flatMap((f) => [...f.text.matchAll(re)].map((m) => `${f.file}: ${m[0]}`));
}

/**
 * A component is a unit of the kernel; a plugin is a folder an operator adds (docs/ARCHITECTURE.md
 * "Composition"). The kernel's units were once called plugins too, and the two meanings mixed in
 * names, error texts and docs; these keep them apart.
 */
describe('components and plugins are named apart', () => {
  it('the kernel never says plugin: it knows only components', () => {
    expect(hits(code('src/kernel'), /\w*plugin\w*/gi)).toEqual([]);
  });

  it('no identifier in src/ names a kernel unit a plugin (metricsPlugin, definePlugin, PluginContext)', () => {
    // Plugin-folder names (definePluginFolder, PluginDefinition, PluginFailure) start with Plugin and go on.
    expect(hits(code('src'), /\b(?:\w+Plugins?|Plugins?|Plugin(?:Context|State))\b/g)).toEqual([]);
  });

  it('the docs call kernel units components', () => {
    const docs = [
      'README.md',
      ...readdirSync(join(root, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/${f}`),
    ];
    const kernelPlugin = /kernel plugins?\b|\b(?:definePlugin|DaemonPlugin|corePlugins|rootPlugins)\b/gi;
    expect(
      hits(
        docs.map((file) => ({ file, text: readFileSync(join(root, file), 'utf8') })),
        kernelPlugin,
      ),
    ).toEqual([]);
  });
});
