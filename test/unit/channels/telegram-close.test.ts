import { createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { describe, expect, it, onTestFinished } from 'vitest';
import { TelegramAdapter } from '../../../channels/telegram/adapter.js';
import type { HttpRoutes } from '../../../src/contracts/http.js';
import { createLogger } from '../../../src/observe/logger.js';
import { waitFor } from '../../helpers/daemon.js';

const noHttp: HttpRoutes = { route: () => () => {}, upgrade: () => () => {}, has: () => false, ownOrigin: () => true };

describe('Telegram adapter close', () => {
  it('closes the keep-alive pool of its hot calls: the server sees the socket closed', async () => {
    const sockets = new Set<Socket>();
    // Answers every Bot API call with ok; never closes an idle socket itself, so only the client can.
    const server = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true,"result":true}'));
    });
    server.keepAliveTimeout = 0;
    server.on('connection', (s: Socket) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    server.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    onTestFinished(() => {
      server.closeAllConnections();
      server.close();
    });
    const apiRoot = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const adapter = new TelegramAdapter(
      { id: 'tg', apiRoot, mode: 'polling', nativeDrafts: false, richMessages: false, http: noHttp, log: createLogger({ level: 'silent' }) },
      '1:test',
    );
    const target = { channelId: 'tg', chatId: '42', chatType: 'dm' as const };
    await adapter.typing(target, { signal: AbortSignal.timeout(10_000) });
    // The pooled call kept its socket open for the next one.
    expect(sockets.size).toBe(1);
    await adapter.close();
    await waitFor(() => sockets.size === 0, 2000);
  });
});
