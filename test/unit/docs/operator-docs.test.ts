import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parse } from 'smol-toml';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { kinds } from '../../helpers/kinds.js';

const root = join(import.meta.dirname, '../../..');
const read = (p: string) => readFileSync(join(root, p), 'utf8');
/** The front page and every guide it links: each check on the operator's docs runs over all of them. */
const docs = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

describe('what the operator copies from the repository', () => {
  it('the Slack manifest has the scopes and the interactivity that attachments, ack_reaction and approvals need', () => {
    const manifest = read('docs/slack-app-manifest.yaml');
    const scopes = [...manifest.matchAll(/^\s+- ([a-z_.]+:[a-z_.]+)/gm)].map((m) => m[1]);
    expect(scopes).toEqual(expect.arrayContaining(['files:read', 'reactions:write', 'chat:write']));
    expect(manifest).toMatch(/interactivity:\n\s+is_enabled: true/);
  });

  it('daemon.config.toml carries a commented model example that is a valid agent once uncommented', () => {
    const shipped = read('daemon.config.toml');
    const agent = shipped.slice(shipped.indexOf('[agent]'), shipped.indexOf('# workspace_dir'));
    const example = agent
      .split('\n')
      .filter((l) => /^# (provider|base_url|model) = /.test(l))
      .map((l) => l.slice(2).replace(/\s+#.*$/, ''));
    expect(example.map((l) => l.split(' =')[0])).toEqual(['provider', 'base_url', 'model']);
    const toml = `[agent]\n${example.join('\n')}\n\n[[channels]]\nid = "web"\ntype = "webchat"\n`;
    expect(parse(toml)).toMatchObject({ agent: { provider: 'openai-compatible' } });
    expect(parseConfig(toml, 'daemon.config.toml', kinds, {}).config.agents.default?.provider).toBe('openai-compatible');
  });

  it.each(docs)('%s states no test counts that go stale', (file) => {
    expect(read(file)).not.toMatch(/\b\d{3,} passed\b/);
  });

  it.each(docs)('%s links only to files that exist', (file) => {
    const targets = [...read(file).matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)].map((m) => m[1]!).filter((t) => !/^[a-z]+:/.test(t));
    expect(targets.filter((t) => !existsSync(join(root, dirname(file), t)))).toEqual([]);
  });

  it('README.md stays a front page: at most 400 lines, the two set-up commands, nothing outside the repository', () => {
    const readme = read('README.md');
    expect(readme.split('\n').length).toBeLessThanOrEqual(400);
    expect(readme).toContain('npm ci && npm start');
    expect(readme).toContain('npm ci && npm test');
    expect(readme).not.toContain('../shared');
  });
});
