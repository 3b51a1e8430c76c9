import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { withTempDir } from '../helpers/fixtures.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { echoAgent, webchatChannel } from '../helpers/toml.js';

interface Status {
  generation: number;
  /** Set once a reload has restarted what it changed. */
  last_reload: { ok: boolean } | null;
  channels: Array<{ id: string; connection: number; state: string }>;
}

const status = async (url: string) => (await (await fetch(`${url}/status`)).json()) as Status;
const connectionsMetric = async (url: string, channel: string) => {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`channeld_channel_connections_total{channel="${channel}"}`));
  return line === undefined ? undefined : Number(line.split(' ').at(-1));
};

describe('a channel restarted by a reload keeps counting', () => {
  it('SIGHUP with the channel changed: connection 2 in /status and channeld_channel_connections_total 2, an unchanged channel still at 1', async () => {
    const dir = withTempDir('reload-count');
    const file = writeProcessConfig(dir, echoAgent(0) + webchatChannel('web') + webchatChannel('same'));
    const p = withDaemonProcess(file);
    const url = await p.url();
    await waitFor(async () => (await status(url)).channels.every((c) => c.state === 'connected'));
    expect((await status(url)).channels.find((c) => c.id === 'web')).toMatchObject({ connection: 1 });
    expect(await connectionsMetric(url, 'web')).toBe(1);

    writeProcessConfig(dir, echoAgent(0) + webchatChannel('web', 'edit_interval_ms = 250\n') + webchatChannel('same'));
    p.signal('SIGHUP');
    await waitFor(async () => {
      const st = await status(url);
      return st.last_reload?.ok === true && st.channels.every((c) => c.state === 'connected');
    });
    const st = await status(url);
    expect(st.channels.find((c) => c.id === 'web')).toMatchObject({ state: 'connected', connection: 2 });
    expect(st.channels.find((c) => c.id === 'same')).toMatchObject({ state: 'connected', connection: 1 });
    expect(await connectionsMetric(url, 'web')).toBe(2);
    expect(await connectionsMetric(url, 'same')).toBe(1);
    p.signal('SIGTERM');
    expect(await p.exited).toBe(0);
  });
});
