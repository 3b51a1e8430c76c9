import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { MAX_DURATION_MS } from '../../../src/config/schema.js';
import { configProblems } from '../../helpers/config.js';
import { kinds } from '../../helpers/kinds.js';

const web = `[[channels]]\nid = "web"\ntype = "webchat"\n`;
const problems = (source: string, env: NodeJS.ProcessEnv = {}) => configProblems(source, 'daemon.config.toml', env);

/** Every key ending in `_ms` anywhere in the schema (channel kinds included), with the schema that checks its value. */
function msKeys(schema: z.ZodType, path: string, out: Array<[string, z.ZodType]>): Array<[string, z.ZodType]> {
  const def = (schema as unknown as { _zod: { def: Record<string, unknown> & { type: string } } })._zod.def;
  const inner = (s: unknown) => msKeys(s as z.ZodType, path, out);
  switch (def.type) {
    case 'object':
      for (const [k, v] of Object.entries(def.shape as Record<string, z.ZodType>)) {
        if (k.endsWith('_ms')) out.push([`${path}.${k}`, v]);
        msKeys(v, `${path}.${k}`, out);
      }
      break;
    case 'default':
    case 'prefault':
    case 'optional':
    case 'nullable':
      inner(def.innerType);
      break;
    case 'pipe':
      inner(def.in);
      break;
    case 'array':
      msKeys(def.element as z.ZodType, `${path}[]`, out);
      break;
    case 'record':
      msKeys(def.valueType as z.ZodType, `${path}.*`, out);
      break;
    case 'union':
      for (const o of def.options as z.ZodType[]) inner(o);
      break;
  }
  return out;
}

describe('check refuses what an operator gets wrong (exit 78, file:line:col)', () => {
  // A kind may bound its own key tighter (an IRC flood interval past a minute makes no sense); none goes past a day.
  it('every *_ms key, everywhere, is bounded to one day', () => {
    const keys = msKeys(kinds.configSchema, 'config', []);
    expect(keys.length).toBeGreaterThan(15);
    const unbounded = keys.filter(([, s]) => s.safeParse(MAX_DURATION_MS + 1).success).map(([k]) => k);
    expect(unbounded).toEqual([]);
  });

  it.each([
    ['[agent]\napproval_timeout_ms = 3000000000\n', 'agent.approval_timeout_ms', 2],
    ['[agent]\n[[agent.mcp]]\nname = "x"\ncommand = "y"\ntimeout_ms = 3000000000\n', 'agent.mcp[0].timeout_ms', 5],
  ])('%s is refused with its line', (source, key, line) => {
    const lines = problems(source + web);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      new RegExp(`^daemon\\.config\\.toml:${line}:\\d+: ${key.replace(/[.[\]]/g, '\\$&')}: .* is too big: must be at most ${MAX_DURATION_MS}$`),
    );
  });

  it('refuses absurd prices; a real one passes', () => {
    const lines = problems(`[models."m"]\nprice_in_per_mtok = 1e308\nprice_out_per_mtok = 1e6\n${web}`);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^daemon\.config\.toml:2:\d+: models\.m\.price_in_per_mtok: .* is too big: must be at most 10000$/);
    expect(lines[1]).toMatch(/^daemon\.config\.toml:3:\d+: models\.m\.price_out_per_mtok: /);
    expect(problems(`[models."m"]\nprice_in_per_mtok = 2.5\nprice_out_per_mtok = 10\n${web}`)).toEqual([]);
  });

  it('refuses duplicate MCP names, headers_env naming an unset variable, and an MCP url that is not http(s)', () => {
    const mcp = (name: string, extra: string) => `[[agent.mcp]]\nname = "${name}"\n${extra}\n`;
    const lines = problems(
      `[agent]\n${mcp('fs', 'command = "a"')}${mcp('fs', 'command = "b"')}${mcp('remote', 'url = "https://x.example/mcp"\nheaders_env = { Authorization = "NOT_SET_ANYWHERE" }')}${web}`,
    );
    expect(lines).toEqual([
      expect.stringMatching(/^daemon\.config\.toml:6:\d+: agent\.mcp\[1\]\.name: "fs" is already the name of mcp\[0\]/),
      expect.stringMatching(/^daemon\.config\.toml:\d+:\d+: agent\.mcp\[2\]\.headers_env\.Authorization: environment variable NOT_SET_ANYWHERE is not set$/),
    ]);
    expect(problems(`[agent]\n${mcp('files', 'url = "file:///etc/passwd"')}${web}`)).toEqual([
      expect.stringMatching(/^daemon\.config\.toml:4:\d+: agent\.mcp\[0\]\.url: write an http:\/\/ or https:\/\/ URL$/),
    ]);
    expect(problems(`[agent]\n${mcp('remote', 'url = "https://x.example/mcp"\nheaders_env = { Authorization = "MCP_T" }')}${web}`, { MCP_T: 'v' })).toEqual([]);
  });

  it('refuses a cluster URL that is not a URL', () => {
    const cluster = '[cluster]\nnats_url_env = "NATS"\npostgres_url_env = "PG"\n';
    const lines = problems(cluster + web, { NATS: 'not a url', PG: 'postgres://u@127.0.0.1/db' });
    expect(lines).toEqual([expect.stringMatching(/^daemon\.config\.toml:2:\d+: cluster\.nats_url_env: the nats_url it names is not a URL/)]);
    expect(problems(cluster + web, { NATS: 'nats://127.0.0.1:4222', PG: 'postgres://u@127.0.0.1/db' })).toEqual([]);
  });

  it('a key that must be positive says "at least 1", not "at least 0"', () => {
    const lines = problems(`[limits]\nmax_in_flight = 0\n${web}`);
    expect(lines).toEqual([expect.stringMatching(/max_in_flight: 0 is too small: must be at least 1$/)]);
    const budget = problems(`[agent]\ndaily_budget = 0\n${web}`);
    expect(budget).toEqual([expect.stringMatching(/daily_budget: 0 is too small: must be more than 0$/)]);
  });
});
