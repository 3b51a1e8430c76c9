import { connect } from 'node:net';
import { scaled } from './timing.js';

/**
 * Writes `request` (a head, maybe part of a body) on a raw socket to 127.0.0.1:`port` and
 * waits for the answer and the socket's close: how a test sends what no HTTP client would (a
 * body shorter than declared, trickled, never sent).
 */
export function rawHttp(port: number, request: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let got = '';
    const deadline = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within the test's deadline; got ${JSON.stringify(got)}`));
    }, scaled(5_000));
    socket.on('data', (d) => (got += d.toString('latin1')));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(deadline);
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(got)?.[1] ?? 0), text: got.slice(got.indexOf('\r\n\r\n') + 4) });
    });
    socket.write(request);
  });
}

/**
 * POSTs `headers` on a raw socket, then trickles the declared body a byte every 50 ms (each
 * byte keeps a kept-alive socket from idling out). Resolves with the answer's status and
 * whether the server closed the socket within `boundMs` of the answer (status 0: no answer).
 */
export function trickled(port: number, path: string, headers: Record<string, string>, boundMs: number): Promise<{ status: number; closed: boolean }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let got = '';
    let answered = false;
    let bound = setTimeout(() => done(false), scaled(5_000));
    const trickle = setInterval(() => socket.writable && socket.write('x'), 50);
    const done = (closed: boolean) => {
      clearInterval(trickle);
      clearTimeout(bound);
      socket.removeAllListeners('close');
      socket.destroy();
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(got)?.[1] ?? 0), closed });
    };
    socket.on('error', () => {});
    socket.on('data', (d) => {
      got += d.toString('latin1');
      if (answered) return;
      answered = true;
      clearTimeout(bound);
      bound = setTimeout(() => done(false), boundMs);
    });
    socket.on('close', () => done(true));
    const head = Object.entries({ host: `127.0.0.1:${port}`, ...headers }).map(([k, v]) => `${k}: ${v}`);
    socket.write(`POST ${path} HTTP/1.1\r\n${head.join('\r\n')}\r\n\r\n`);
  });
}
