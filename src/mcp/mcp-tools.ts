import { jsonSchema } from 'ai';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { McpServerConfig } from '../config/schema.js';
import { errorMessage } from '../contracts/errors.js';
import type { Tool, ToolContext } from '../contracts/tools.js';
import { ProgressCoalescer } from './progress.js';
import type { McpServer } from './server.js';

/** Decides whether a call that needs approval may run; see ApprovalCoordinator. */
export interface ToolGate {
  /**
   * Resolves `run` when the call may run now; otherwise with what the model is told instead
   * (denied, timed out, or the stored result of a call that already ran).
   */
  admit(
    call: { agent: string; tool: string; args: unknown; ctx: ToolContext },
    signal: AbortSignal,
  ): Promise<{ run: true; done(reply: unknown): void } | { run: false; reply: unknown }>;
}

/** Whether the server's `approval` asks before running this tool (the agent's `tool_approval` may override it). */
export function serverAsks(config: McpServerConfig, tool: string): boolean {
  return config.approval === 'always' || (Array.isArray(config.approval) && config.approval.includes(tool));
}

/** The result as the model reads it: the text parts, with other parts named. */
export function resultText(result: CallToolResult): string {
  const parts = (result.content ?? []).map((c) => {
    switch (c.type) {
      case 'text':
        return c.text;
      case 'resource':
        return 'text' in c.resource ? c.resource.text : `[resource ${c.resource.uri}]`;
      case 'resource_link':
        return `[resource ${c.uri}]`;
      default:
        return `[${c.type} ${'mimeType' in c ? String(c.mimeType) : ''}]`.replace(' ]', ']');
    }
  });
  if (parts.length === 0 && result.structuredContent !== undefined) return JSON.stringify(result.structuredContent);
  return parts.join('\n');
}

/**
 * The runtime tools of one connected MCP server, under the names the model API takes
 * (McpServer.offered); a call reaches the tool by its MCP name. Each call: the server's `timeout_ms`,
 * progress notifications as `tool_log` events; failures go back to the model as tool
 * errors. Approval (the server's `approval` is the tool's default) and `/stop tool` are
 * every tool's, added around each call by src/tools/tool-calls.ts: `ctx.signal` is the call's.
 */
export function mcpTools(server: McpServer): Tool[] {
  const cfg = server.config;
  return server.offered.map(({ name, tool: t }) => {
    return {
      name,
      description: t.description ?? t.title ?? name,
      input: jsonSchema({ ...t.inputSchema, type: 'object' } as Parameters<typeof jsonSchema>[0]),
      approval: serverAsks(cfg, t.name) ? 'always' : 'never',
      run: async (input: unknown, ctx: ToolContext) => {
        const progressLines = new ProgressCoalescer((line) => ctx.log?.(line));
        try {
          const result = await server.call(t.name, (input ?? {}) as Record<string, unknown>, {
            signal: ctx.signal,
            timeoutMs: cfg.timeout_ms,
            onProgress: (progress, total, message) => {
              progressLines.push(`${progress}${total !== undefined ? `/${total}` : ''}${message ? ` ${message}` : ''}`);
            },
          });
          const text = resultText(result);
          return result.isError ? { error: text } : text;
        } catch (err) {
          // A stop (the turn's, or `/stop tool`) goes up as a cancel; everything else is the model's to read.
          if (ctx.signal.aborted) throw err;
          return { error: errorMessage(err) };
        } finally {
          progressLines.close();
        }
      },
    } satisfies Tool;
  });
}
