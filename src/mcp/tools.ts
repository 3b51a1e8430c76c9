import { jsonSchema } from 'ai';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { McpServerConfig } from '../config/schema.js';
import { errorMessage } from '../contracts/errors.js';
import type { Tool, ToolContext } from '../contracts/tools.js';
import { CancelledByUser, type RunningCalls } from '../runtime/running-calls.js';
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

export interface McpToolDeps {
  running: RunningCalls;
  gate?: ToolGate;
}

/** `server__tool`: the name the model sees. */
export function toolName(server: string, tool: string): string {
  return `${server}__${tool}`;
}

/** Whether `approval` asks before running this tool. */
export function needsApproval(config: McpServerConfig, tool: string): boolean {
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
 * The runtime tools of one connected MCP server. Each call: approval when configured, a
 * per-call cancel (`/stop tool`) besides the turn's, the server's `timeout_ms`, progress
 * notifications as `tool_log` events; failures go back to the model as tool errors.
 */
export function mcpTools(agent: string, server: McpServer, deps: McpToolDeps): Tool[] {
  const cfg = server.config;
  return server.tools.map((t) => {
    const name = toolName(cfg.name, t.name);
    return {
      name,
      description: t.description ?? t.title ?? name,
      input: jsonSchema({ ...t.inputSchema, type: 'object' } as Parameters<typeof jsonSchema>[0]),
      run: async (input: unknown, ctx: ToolContext) => {
        const call = new AbortController();
        const onTurnAbort = () => call.abort(ctx.signal.reason);
        if (ctx.signal.aborted) onTurnAbort();
        ctx.signal.addEventListener('abort', onTurnAbort, { once: true });
        const untrack = deps.running.track(ctx.scope, call);
        let done: ((reply: unknown) => void) | undefined;
        const progressLines = new ProgressCoalescer((line) => ctx.log?.(line));
        try {
          if (needsApproval(cfg, t.name) && deps.gate) {
            const verdict = await deps.gate.admit({ agent, tool: name, args: input, ctx }, call.signal);
            if (!verdict.run) return verdict.reply;
            done = verdict.done;
          }
          const result = await server.call(t.name, (input ?? {}) as Record<string, unknown>, {
            signal: call.signal,
            timeoutMs: cfg.timeout_ms,
            onProgress: (progress, total, message) => {
              progressLines.push(`${progress}${total !== undefined ? `/${total}` : ''}${message ? ` ${message}` : ''}`);
            },
          });
          const text = resultText(result);
          const reply = result.isError ? { error: text } : text;
          done?.(reply);
          return reply;
        } catch (err) {
          // The turn's own stop goes up as a cancel; everything else is the model's to read.
          const reply = { error: call.signal.reason instanceof CancelledByUser ? 'cancelled by the user' : errorMessage(err) };
          done?.(reply);
          if (ctx.signal.aborted) throw err;
          return reply;
        } finally {
          progressLines.close();
          untrack();
          ctx.signal.removeEventListener('abort', onTurnAbort);
        }
      },
    } satisfies Tool;
  });
}
