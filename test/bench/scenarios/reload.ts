import { waitFor } from '../../helpers/daemon.js';
import { ChatClient } from '../../helpers/webchat-client.js';
import { Fleet } from '../fleet.js';
import type { Row, ScenarioOptions } from '../report.js';

interface Status {
  generation: number;
  channels: Array<{ id: string; state: string; connection: number }>;
}

/**
 * Reload: SIGHUP changing one of four channels (Telegram); the time until it is connected
 * again, and proof that the other three kept their connections: their connection counters,
 * the fake gateways' connection counts, and an open web chat socket.
 */
export async function reload(o: ScenarioOptions): Promise<Row[]> {
  void o;
  const fleet = await new Fleet().start();
  try {
    fleet.write();
    const p = fleet.spawn();
    try {
      // Port 0: the daemon says where it listens. The rewrite below keeps `listen` as it was
      // (port 0): a reload that changes [http] listen is refused (it needs a restart).
      const port = Number(new URL(await p.url(30_000)).port);
      const status = async () => (await (await fetch(`http://127.0.0.1:${port}/status`)).json()) as Status;
      await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200, 30_000);
      await waitFor(() => fleet.dc.connected && fleet.sl.socketOpen, 10_000);
      const web = new ChatClient(`http://127.0.0.1:${port}`, 'bench');
      await web.opened;
      const before = await status();
      const gateways = { discord: fleet.dc.gateway.connections, slack: fleet.sl.connections };
      fleet.write({ tgExtra: 'require_mention = false\n' });
      const t0 = performance.now();
      p.signal('SIGHUP');
      await waitFor(
        async () => {
          const s = await status();
          return s.generation === before.generation + 1 && s.channels.find((c) => c.id === 'tg')?.state === 'connected';
        },
        30_000,
        2,
      );
      const ms = performance.now() - t0;
      const after = await status();
      const kept = ['web', 'dc', 'sl'].every(
        (id) => after.channels.find((c) => c.id === id)?.connection === before.channels.find((c) => c.id === id)?.connection,
      );
      const socketsKept = fleet.dc.gateway.connections === gateways.discord && fleet.sl.connections === gateways.slack;
      web.send('still connected?');
      const [reply] = await web.finals(1, 5000);
      web.close();
      return [
        { scenario: 'reload', metric: 'SIGHUP → changed channel connected again', value: ms, unit: 'ms' },
        {
          scenario: 'reload',
          metric: 'other three channels kept their connection (1 = yes)',
          value: kept && socketsKept && reply?.text === 'still connected?' ? 1 : 0,
          unit: 'bool',
          target: '1',
          met: kept && socketsKept,
        },
      ];
    } finally {
      p.signal('SIGTERM');
      await p.exited;
    }
  } finally {
    await fleet.close();
  }
}
