import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { z } from 'zod';
import { ChannelKinds } from '../../../src/config/kinds.js';
import { defineChannel, type ChannelAdapter } from '../../../src/contracts/channel.js';
import { Daemon } from '../../../src/daemon/daemon.js';
import { header, LogSink, waitFor } from '../../helpers/daemon.js';

/** What happened to each built adapter, in order, by channel id ("listening", "listen ended", "closed"). */
const events = new Map<string, string[]>();
const record = (id: string, what: string): void => void events.set(id, [...(events.get(id) ?? []), what]);

/** A kind whose adapter listens until stopped and records its `close`. */
const closer = defineChannel({
  kind: 'closer',
  summary: 'test only: records when its adapter is closed',
  config: z.object({}),
  secrets: { names: [], needs: () => ({ required: [], optional: [] }) },
  allowFromOptional: true,
  exclusiveListener: () => false,
  load: async () => (config) => {
    const never = () => Promise.reject(new Error('not used'));
    const adapter: ChannelAdapter = {
      id: config.id,
      selfId: 'bot',
      capabilities: { maxMessageLength: 4000, editsDrafts: false, minEditIntervalMs: 0, nativeStream: false, typing: false },
      listen: async (_deliver, signal, onConnected) => {
        record(config.id, 'listening');
        onConnected();
        await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
        record(config.id, 'listen ended');
      },
      send: never,
      edit: never,
      delete: never,
      typing: never,
      close: async () => record(config.id, 'closed'),
    };
    return adapter;
  },
});

const channel = (id: string) => `[[channels]]\nid = "${id}"\ntype = "closer"\n`;

describe('the daemon closes a channel adapter once it is dropped', () => {
  it('on a reload that removes the channel (the others stay open), and at shutdown after the drain', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'channeld-close-'));
    const configFile = join(dir, 'daemon.config.toml');
    const write = (body: string) => writeFileSync(configFile, `${header(dir)}[agent]\nprovider = "echo"\n${body}`);
    write(channel('kept') + channel('removed'));
    const daemon = await Daemon.start({
      configFile,
      kinds: new ChannelKinds([closer]),
      env: {},
      logger: { destination: new LogSink(), level: 'debug', pretty: false },
    });
    onTestFinished(async () => {
      await daemon.stop();
      rmSync(dir, { recursive: true, force: true });
    });
    await waitFor(() => events.get('kept')?.includes('listening') && events.get('removed')?.includes('listening'));

    write(channel('kept'));
    expect(await daemon.reload()).toMatchObject({ ok: true, removed: ['removed'] });
    expect(events.get('removed')).toEqual(['listening', 'listen ended', 'closed']);
    expect(events.get('kept')).toEqual(['listening']);

    await daemon.stop();
    expect(events.get('kept')).toEqual(['listening', 'listen ended', 'closed']);
  });
});
