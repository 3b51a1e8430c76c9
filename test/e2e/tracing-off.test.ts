import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OtlpReceiver } from '../fakes/otlp-receiver.js';
import { waitFor } from '../helpers/daemon.js';
import { withStarted, withTempDir } from '../helpers/fixtures.js';
import { telegramChannel, telegramEnv, withTelegram } from '../helpers/platforms.js';
import { withDaemonProcess, writeProcessConfig } from '../helpers/process.js';
import { echoAgent } from '../helpers/toml.js';

const recorder = join(import.meta.dirname, '../fixtures/record-modules.mjs');

/** Runs the built daemon with `observe` in its config through one Telegram turn; returns the @opentelemetry modules it resolved. */
async function modulesLoaded(observe: string): Promise<string[]> {
  const tg = await withTelegram();
  const dir = withTempDir('tracing-off');
  const log = join(dir, 'modules.log');
  const file = writeProcessConfig(dir, observe + echoAgent(0) + telegramChannel(tg));
  const p = withDaemonProcess(file, { ...telegramEnv(tg), CHANNELD_TEST_MODULE_LOG: log }, ['--import', recorder]);
  await p.url();
  tg.dm('one turn, start to end', { id: 7, first_name: 'Ada' });
  await waitFor(() => tg.texts(7).includes('one turn, start to end'), 15_000);
  p.signal('SIGTERM');
  expect(await p.exited).toBe(0);
  return existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean) : [];
}

describe('tracing costs nothing when it is off', () => {
  it('without [observe] otlp_endpoint no OpenTelemetry SDK, exporter or context module is loaded, through start-up, a turn and shutdown', async () => {
    // @opentelemetry/api alone was loaded before tracing existed: prom-client's process CPU
    // metric requires it (for exemplars). Nothing tracing added may join it.
    const loaded = await modulesLoaded('');
    expect(loaded.filter((u) => !u.includes('/node_modules/@opentelemetry/api/'))).toEqual([]);
  });

  it('with an endpoint the same run loads them (the recorder sees them) and exports the turn', async () => {
    const receiver = await withStarted(new OtlpReceiver());
    const loaded = await modulesLoaded(`[observe]\notlp_endpoint = "${receiver.url}"\n`);
    expect(loaded.some((u) => u.includes('/@opentelemetry/sdk-trace/'))).toBe(true);
    expect(loaded.some((u) => u.includes('/@opentelemetry/exporter-trace-otlp-http/'))).toBe(true);
    expect(receiver.spans.some((s) => s.name === 'turn')).toBe(true);
  });
});
