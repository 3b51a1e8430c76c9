import { createServer } from 'node:net';

/** Whether 127.0.0.1:`port` can be listened on now (a server listens and closes again). */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * A free port below the kernel's ephemeral range (32768–60999), for a server that stops and
 * starts again on the same port: no other test's listen(0) can take it in between, as it could
 * take an ephemeral one. Random in 20000–29999; a port already taken is skipped.
 */
export async function fixedFreePort(): Promise<number> {
  for (let tries = 0; tries < 100; tries++) {
    const port = 20000 + Math.floor(Math.random() * 10000);
    if (await canListen(port)) return port;
  }
  throw new Error('no free port in 20000–29999 after 100 tries');
}
