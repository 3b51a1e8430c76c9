import { describe, expect, it } from 'vitest';
import type { AgentEvent } from '../../../src/contracts/agent-events.js';
import type { AgentRunner } from '../../../src/contracts/agent-runner.js';
import { type Candidate, FailoverRunner, ModelCooldowns } from '../../../src/agent/failover.js';

/** A model that sends `events` in order, then ends; records whether it was closed and with which model it ran. */
class Scripted implements AgentRunner {
  readonly name = 'scripted';
  closed = false;
  models: Array<string | undefined> = [];
  constructor(private readonly events: AgentEvent[]) {}
  async *run(input: { model?: string }): AsyncIterable<AgentEvent> {
    this.models.push(input.model);
    try {
      for (const e of this.events) yield e;
    } finally {
      this.closed = true;
    }
  }
}

const done: AgentEvent = { type: 'done', usage: { inputTokens: 1, outputTokens: 1, estimated: true } };

function failover(...runners: Scripted[]) {
  const cooldowns = new ModelCooldowns(() => 60_000);
  const served: string[] = [];
  const failedOver: string[] = [];
  const candidates: Candidate[] = runners.map((r, i) => ({ key: `p:m${i}`, model: `m${i}`, runner: () => r }));
  const runner = new FailoverRunner(() => candidates, cooldowns, { served: (k) => served.push(k), failedOver: (k) => failedOver.push(k) });
  return { runner, cooldowns, served, failedOver };
}

async function collect(runner: AgentRunner, stopAfter = Infinity) {
  const events: AgentEvent[] = [];
  const models: string[] = [];
  const signal = new AbortController().signal;
  for await (const e of runner.run({ system: '', history: [], text: 'x' }, { scope: 's', channelId: 'c', signal, onModel: (m) => models.push(m) }, signal)) {
    events.push(e);
    if (events.length >= stopAfter) break;
  }
  return { events, models };
}

describe('one model, nothing to fail over to', () => {
  it('holds reasoning until text shows, passes it in order, and names the model in done', async () => {
    const model = new Scripted([{ type: 'reasoning_delta', text: 'hmm' }, { type: 'text_delta', text: 'hi' }, done]);
    const f = failover(model);
    const { events, models } = await collect(f.runner);
    expect(events.map((e) => e.type)).toEqual(['reasoning_delta', 'text_delta', 'done']);
    expect(events[2]).toMatchObject({ type: 'done', model: 'p:m0' });
    expect(models).toEqual(['m0']);
    expect(model.models).toEqual(['m0']);
    expect(f.served).toEqual(['p:m0']);
    expect(model.closed).toBe(true);
  });

  it('a failure before any text drops the held reasoning, cools the model down and ends the turn', async () => {
    const model = new Scripted([
      { type: 'reasoning_delta', text: 'hmm' },
      { type: 'error', code: 'PROVIDER_UNAVAILABLE', message: 'down' },
      { type: 'text_delta', text: 'never' },
    ]);
    const f = failover(model);
    const { events } = await collect(f.runner);
    expect(events).toEqual([{ type: 'error', code: 'PROVIDER_UNAVAILABLE', message: 'down' }]);
    expect(f.cooldowns.cooling('p:m0')).toBe(true);
    expect(f.served).toEqual([]);
    expect(model.closed).toBe(true);
  });

  it('a failure after text does not cool the model down; it is still tried while cooling', async () => {
    const f = failover(
      new Scripted([
        { type: 'text_delta', text: 'a' },
        { type: 'error', code: 'PROVIDER_FAILED', message: 'cut' },
      ]),
    );
    f.cooldowns.failed('p:m0');
    const { events } = await collect(f.runner);
    expect(events.map((e) => e.type)).toEqual(['text_delta', 'error']);
    expect(f.cooldowns.snapshot()[0]?.failures).toBe(1);
  });

  it('a consumer that stops early closes the model', async () => {
    const model = new Scripted([{ type: 'text_delta', text: 'a' }, { type: 'text_delta', text: 'b' }, done]);
    const { events } = await collect(failover(model).runner, 1);
    expect(events).toHaveLength(1);
    expect(model.closed).toBe(true);
  });

  it('a model that throws reaches the consumer as the same error', async () => {
    const broken: AgentRunner = {
      name: 'broken',
      // biome-ignore lint/correctness/useYield: it fails before its first event
      async *run() {
        throw new Error('boom');
      },
    };
    const runner = new FailoverRunner(() => [{ key: 'p:b', model: 'b', runner: () => broken }], new ModelCooldowns(() => 1000));
    await expect(collect(runner)).rejects.toThrow('boom');
  });
});

describe('several models', () => {
  it('moves on before any text, leaving the failed model no events, and skips a cooling model next time', async () => {
    const first = new Scripted([
      { type: 'reasoning_delta', text: 'r' },
      { type: 'error', code: 'PROVIDER_TIMEOUT', message: 't' },
    ]);
    const second = new Scripted([{ type: 'text_delta', text: 'ok' }, done]);
    const f = failover(first, second);
    const { events, models } = await collect(f.runner);
    expect(events.map((e) => e.type)).toEqual(['text_delta', 'done']);
    expect(events[1]).toMatchObject({ model: 'p:m1' });
    expect(models).toEqual(['m0', 'm1']);
    expect(f.failedOver).toEqual(['p:m0']);
    const again = await collect(f.runner);
    expect(again.models).toEqual(['m1']);
  });
});
