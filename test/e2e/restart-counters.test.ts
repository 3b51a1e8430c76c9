import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Daemon } from '../../src/daemon/daemon.js';
import { FakeLlm } from '../fakes/llm/server.js';
import { startDaemon, type TestDaemon } from '../helpers/daemon.js';
import { kinds } from '../helpers/kinds.js';
import { ChatClient } from '../helpers/webchat-client.js';
import { midHourMs, shiftClockTo } from '../fixtures/clock-mid-hour.mjs';

const sum = (a: number[]) => a.reduce((x, y) => x + y, 0);

describe('what a restart keeps: the charts minutes and the per-sender quota counters (SQLite)', () => {
  let llm: FakeLlm;
  let first: TestDaemon;
  let second: Daemon | undefined;
  // Half past the hour in this process (the daemon runs in it): the hourly window cannot roll over mid-test.
  let restoreClock: () => void = () => {};
  beforeAll(() => {
    restoreClock = shiftClockTo(midHourMs());
  });
  afterAll(async () => {
    restoreClock();
    await second?.stop();
    await llm?.close();
    if (first) rmSync(first.dir, { recursive: true, force: true });
  });

  it('after a restart the charts still show the earlier traffic, and a sender at user_turns_per_hour = 1 is refused without a model call', async () => {
    llm = new FakeLlm();
    await llm.start();
    first = await startDaemon(
      `[limits]\nuser_turns_per_hour = 1\n\n[agent]\nprovider = "openai-compatible"\nbase_url = "${llm.url}"\nmodel = "m"\n\n[[channels]]\nid = "web"\ntype = "webchat"\n`,
    );
    const c = new ChatClient(first.url, 'tab-restart');
    await c.opened;
    c.send('hello');
    await c.finals(1);
    c.close();
    expect(llm.requests.length).toBe(1);
    // Stopped as SIGTERM does, the state directory kept.
    await first.daemon.stop();

    second = await Daemon.start({ configFile: first.configFile, kinds, env: {}, logger: { level: 'silent' } });
    const url = `http://127.0.0.1:${second.address.port}`;
    const charts = (await (await fetch(`${url}/actions/charts?minutes=60`)).json()) as { messages: number[]; turns: number[] };
    expect(sum(charts.messages)).toBe(1);
    expect(sum(charts.turns)).toBe(1);

    const again = new ChatClient(url, 'tab-restart');
    await again.opened;
    // A new message id: the inbox keeps the first one's and would drop a redelivery.
    again.send('hello again', 'after-restart');
    const [refusal] = await again.finals(1);
    again.close();
    expect(refusal!.text).toMatch(/\(user_turns_per_hour\)/);
    expect(llm.requests.length).toBe(1);
  });
});
