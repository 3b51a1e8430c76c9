import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Tool as McpTool } from '@modelcontextprotocol/sdk/types.js';
import { ChannelError } from '../contracts/errors.js';

/** `tools/list` pages read per connection; a server still sending a next cursor after this is broken. */
export const MAX_TOOL_PAGES = 50;
/** Bytes of tool definitions (their JSON) kept per server: every one of them goes with each model request. */
export const MAX_TOOL_LIST_BYTES = 2 * 1024 * 1024;

/**
 * Lists a server's tools with bounds on pages, tools and bytes, since a server may answer
 * with an endless cursor or tens of thousands of tools. Past a bound it throws a fatal
 * (not retryable) coded error: retrying would list the same again, so the server is `failed`.
 */
export async function listToolsBounded(client: Pick<Client, 'listTools'>, o: { server: string; maxTools: number; signal: AbortSignal }): Promise<McpTool[]> {
  const listed: McpTool[] = [];
  let bytes = 0;
  let cursor: string | undefined;
  for (let page = 1; ; page++) {
    const answer = await client.listTools(cursor ? { cursor } : {}, { signal: o.signal });
    for (const tool of answer.tools) {
      if (listed.length >= o.maxTools)
        throw new ChannelError('MCP_TOO_MANY_TOOLS', `MCP server "${o.server}" lists more than max_tools = ${o.maxTools} tools`, { retryable: false });
      bytes += JSON.stringify(tool).length;
      if (bytes > MAX_TOOL_LIST_BYTES)
        throw new ChannelError('MCP_TOOLS_TOO_LARGE', `MCP server "${o.server}" lists tools of more than ${MAX_TOOL_LIST_BYTES} bytes`, { retryable: false });
      listed.push(tool);
    }
    cursor = answer.nextCursor;
    if (!cursor) return listed;
    if (page >= MAX_TOOL_PAGES)
      throw new ChannelError('MCP_TOO_MANY_PAGES', `MCP server "${o.server}" still had a next page after ${MAX_TOOL_PAGES} pages of tools/list`, {
        retryable: false,
      });
  }
}
