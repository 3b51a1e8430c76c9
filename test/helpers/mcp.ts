import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { resolve } from 'node:path';
import { onTestFinished } from 'vitest';
import { waitFor, type TestDaemon } from './daemon.js';

/** The installed bins of the reference MCP servers (devDependencies): no network, no npx. */
export const EVERYTHING_BIN = resolve('node_modules/@modelcontextprotocol/server-everything/dist/index.js');
export const FILESYSTEM_BIN = resolve('node_modules/@modelcontextprotocol/server-filesystem/dist/index.js');

/** `startEverythingHttp`, stopped when the test finishes. */
export async function withEverythingHttp(): Promise<{ url: string; child: ChildProcess }> {
  const server = await startEverythingHttp();
  onTestFinished(() => server.stop());
  return server;
}

/** TOML for one stdio server run by this Node. */
export function stdioServer(name: string, bin: string, args: string[], extra = '', table = '[[agent.mcp]]'): string {
  return `${table}\nname = "${name}"\ncommand = ${JSON.stringify(process.execPath)}\nargs = ${JSON.stringify([bin, ...args])}\n${extra}\n`;
}

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

/** server-everything serving Streamable HTTP on a free port; resolves once it listens. */
export async function startEverythingHttp(): Promise<{ url: string; child: ChildProcess; stop(): Promise<void> }> {
  const port = await freePort();
  const child = spawn(process.execPath, [EVERYTHING_BIN, 'streamableHttp'], { env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] });
  await new Promise<void>((ok, fail) => {
    let err = '';
    const timer = setTimeout(() => fail(new Error(`server-everything did not listen: ${err}`)), 20_000);
    child.stderr!.on('data', (d: Buffer) => {
      err += String(d);
      if (err.includes('listening on port')) {
        clearTimeout(timer);
        ok();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      fail(new Error(`server-everything exited ${code}: ${err}`));
    });
  });
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    child,
    stop: async () => {
      if (child.exitCode !== null) return;
      const gone = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await gone;
    },
  };
}

/** Waits until the daemon's first MCP server is connected (a server process can take seconds to start). */
export async function firstMcpConnected(d: TestDaemon): Promise<void> {
  await waitFor(() => d.daemon.mcp.status()[0]?.state === 'connected', 30_000, 50);
}
