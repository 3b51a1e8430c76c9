import type { WebSocket, WebSocketServer } from 'ws';

/**
 * A socket whose peer vanished (a sleeping laptop, a dropped NAT entry) is never closed by
 * TCP on its own, and would stay an open tab forever: each socket is pinged every
 * `intervalMs`, and one that answered none of the last two pings is terminated. Returns the
 * stop function.
 */
export function startHeartbeat(wss: WebSocketServer, intervalMs: number): () => void {
  const unanswered = new WeakMap<WebSocket, number>();
  const timer = setInterval(() => {
    for (const ws of wss.clients) {
      if (!unanswered.has(ws)) ws.on('pong', () => unanswered.set(ws, 0));
      const missed = unanswered.get(ws) ?? 0;
      if (missed >= 2) {
        ws.terminate();
        continue;
      }
      unanswered.set(ws, missed + 1);
      ws.ping();
    }
  }, intervalMs);
  // The daemon's shutdown stops it; it alone must not keep a process (a test) alive.
  timer.unref();
  return () => clearInterval(timer);
}
