import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { kinds } from '../../helpers/kinds.js';
import { configProblems } from '../../helpers/config.js';

const problems = (source: string): string[] => configProblems(source);

describe('[[agent.mcp]] and [[agents.NAME.mcp]] tables', () => {
  it('fill the defaults: all tools, no approval, 60 s per call; 16k result bound; 5 min approval timeout', () => {
    const { config } = parseConfig(
      `[agent]\n\n[[agent.mcp]]\nname = "fs"\ncommand = "mcp-server-filesystem"\nargs = ["/srv"]\n`,
      'daemon.config.toml',
      kinds,
      {},
    );
    const a = config.agents.default!;
    expect(a.mcp).toEqual([
      { name: 'fs', command: 'mcp-server-filesystem', args: ['/srv'], env: {}, headers_env: {}, approval: 'never', timeout_ms: 60000, max_tools: 128 },
    ]);
    expect(a.max_tool_result_chars).toBe(16000);
    expect(a.approval_timeout_ms).toBe(300000);
    expect(a.approvers).toEqual([]);
  });

  it('take a url with headers_env, an allowlist and approval per tool under a named agent', () => {
    const { config } = parseConfig(
      `[agents.ops]\n[[agents.ops.mcp]]\nname = "remote"\nurl = "https://mcp.example/mcp"\nheaders_env = { Authorization = "MCP_AUTH" }\ntools = ["a", "b"]\napproval = ["b"]\n`,
      'daemon.config.toml',
      kinds,
      { MCP_AUTH: 'token' },
    );
    expect(config.agents.ops!.mcp[0]).toMatchObject({
      url: 'https://mcp.example/mcp',
      headers_env: { Authorization: 'MCP_AUTH' },
      tools: ['a', 'b'],
      approval: ['b'],
    });
  });

  it('refuse both or neither of command and url, a name with "__", and unknown keys, naming the line', () => {
    expect(problems(`[agent]\n[[agent.mcp]]\nname = "x"\ncommand = "a"\nurl = "http://127.0.0.1/mcp"\n`)).toEqual([
      'daemon.config.toml:5:7: agent.mcp[0].url: give either command (stdio) or url (Streamable HTTP), not both or neither',
    ]);
    expect(problems(`[agent]\n[[agent.mcp]]\nname = "x"\n`)[0]).toMatch(/agent\.mcp\[0\]\.command: give either command/);
    expect(problems(`[agent]\n[[agent.mcp]]\nname = "a__b"\ncommand = "a"\n`)[0]).toMatch(/^daemon\.config\.toml:3:8: agent\.mcp\[0\]\.name: use letters/);
    expect(problems(`[agent]\n[[agent.mcp]]\nname = "a"\ncommand = "a"\napprove = "always"\n`)).toEqual([
      'daemon.config.toml:5:1: agent.mcp[0].approve: unknown key "approve"',
    ]);
    expect(problems(`[agent]\n[[agent.mcp]]\nname = "a"\ncommand = "a"\napproval = "sometimes"\n`)[0]).toMatch(/agent\.mcp\[0\]\.approval/);
  });
});
