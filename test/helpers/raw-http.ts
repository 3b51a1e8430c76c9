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
