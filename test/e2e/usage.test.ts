import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeEach, describe, expect, it } from 'vitest';
import type { FakeLlm } from '../fakes/llm/server.js';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { withChat, withDaemon, withLlm } from '../helpers/fixtures.js';
import type { ChatClient } from '../helpers/webchat-client.js';

const run = promisify(execFile);
const main = join(import.meta.dirname, '../../dist/bin/channeld.js');

describe('usage and cost: stored per turn, /usage, the usage action, /metrics, prices, daily budget', () => {
  let llm: FakeLlm;
  let d: TestDaemon | undefined;
  beforeEach(async () => {
    llm = await withLlm();
  });

  const config = (url: string) => `
[agents.alpha]
provider = "openai-compatible"
base_url = "${url}"
model = "vision-1"
daily_budget = 5

[agents.beta]
provider = "openai-compatible"
base_url = "${url}"
model = "small-1"

[models."vision-1"]
price_in_per_mtok = 2000
price_out_per_mtok = 10000

[[channels]]
id = "web"
type = "webchat"
agent = "alpha"

[[channels]]
id = "web2"
type = "webchat"
agent = "beta"
`;

  const tab = (path: string, name: string): Promise<ChatClient> => withChat(d!, name, { path });

  const reported = {
    prompt_tokens: 1000,
    completion_tokens: 200,
    prompt_tokens_details: { cached_tokens: 300 },
    completion_tokens_details: { reasoning_tokens: 50 },
  };

  it('stores what the model reported per channel, agent and model; /usage, the action, the CLI and /metrics agree', async () => {
    llm.scriptFor('vision-1', { kind: 'stream', chunks: [{ content: 'one' }], usage: reported });
    llm.scriptFor(
      'small-1',
      { kind: 'stream', chunks: [{ content: 'two' }], usage: { prompt_tokens: 500, completion_tokens: 100 } },
      { kind: 'stream', chunks: [{ content: 'three' }], usage: null },
    );
    d = await withDaemon(config(llm.url));
    const a = await tab('/chat/web', 'a');
    const b = await tab('/chat/web2', 'b');
    a.send('hello alpha');
    await a.finals(1);
    b.send('hello beta');
    await b.finals(1);
    b.send('again beta');
    await b.finals(2);

    const res = await fetch(`${d.url}/actions/usage?since=1d`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { rows: Array<Record<string, unknown>>; total: Record<string, number> };
    expect(body.rows).toHaveLength(2);
    expect(body.rows[0]).toMatchObject({
      channel: 'web',
      agent: 'alpha',
      model: 'vision-1',
      turns: 1,
      input_tokens: 1000,
      output_tokens: 200,
      reasoning_tokens: 50,
      cached_tokens: 300,
      estimated_turns: 0,
    });
    // 1000 tokens at 2000 per million + 200 at 10000 per million.
    expect(body.rows[0]!.cost).toBeCloseTo(4, 9);
    // The second beta turn reported no usage: estimated and marked as such; no price, no cost.
    expect(body.rows[1]).toMatchObject({ channel: 'web2', agent: 'beta', model: 'small-1', turns: 2, estimated_turns: 1, cost: 0 });
    expect(body.rows[1]!.input_tokens).toBeGreaterThan(500);
    expect(body.total).toMatchObject({ turns: 3, cached_tokens: 300, reasoning_tokens: 50 });

    const filtered = (await (await fetch(`${d.url}/actions/usage?since=today&agent=beta`)).json()) as { rows: unknown[] };
    expect(filtered.rows).toHaveLength(1);
    const bad = await fetch(`${d.url}/actions/usage?since=yesterdayish`);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toContain('since');

    a.send('/usage');
    const [, usage] = await a.finals(2);
    expect(usage!.text).toContain('This conversation: 1 turn(s), 1000 in, 200 out (50 reasoning), 300 cached, cost 4.0000');
    expect(usage!.text).toContain('Today (agent alpha): 1 turn(s), 1000 in');
    expect(usage!.text).toContain('Budget today: 1.00 of 5.00 left');

    const metrics = await (await fetch(`${d.url}/metrics`)).text();
    expect(metrics).toContain('channeld_tokens_total{agent="alpha",model="vision-1",channel="web",type="input"} 1000');
    expect(metrics).toContain('channeld_tokens_total{agent="alpha",model="vision-1",channel="web",type="cached"} 300');
    expect(metrics).toContain(`channeld_tokens_total{agent="beta",model="small-1",channel="web2",type="output"} ${body.rows[1]!.output_tokens}`);
    expect(metrics).toContain('channeld_cost_total{agent="alpha",model="vision-1",channel="web"} 4');

    // The CLI face prints the same rows (JSON) and a table (text); it finds the daemon by [http] listen.
    const cliConfig = join(d.dir, 'cli.toml');
    writeFileSync(cliConfig, `[http]\nlisten = "127.0.0.1:${d.daemon.address.port}"\n`);
    const json = await run(process.execPath, [main, 'usage', '7d', '--json', '--config', cliConfig], { env: { PATH: process.env.PATH } });
    expect((JSON.parse(json.stdout) as { rows: unknown[] }).rows).toEqual(body.rows);
    const text = await run(process.execPath, [main, 'usage', '--config', cliConfig], { env: { PATH: process.env.PATH } });
    expect(text.stdout).toMatch(/web\s+alpha\s+vision-1\s+1\s+1000\s+200\s+50\s+300\s+0\s+4\.0000/);
  });

  it('a spent daily budget refuses the next turn with a message; /status shows what is left', async () => {
    llm.scriptFor(
      'vision-1',
      { kind: 'stream', chunks: [{ content: 'first' }], usage: reported },
      { kind: 'stream', chunks: [{ content: 'second' }], usage: reported },
    );
    d = await withDaemon(config(llm.url));
    const a = await tab('/chat/web', 'a');
    a.send('one');
    await a.finals(1);
    a.send('/status');
    const [, status] = await a.finals(2);
    expect(status!.text).toContain('Budget today: 1.00 of 5.00 left');
    a.send('two');
    await a.finals(3);
    a.send('three');
    const finals = await a.finals(4);
    expect(finals[3]!.text).toContain('used its daily budget (8.00 of 5.00)');
    expect(llm.requests.filter((r) => r.body.model === 'vision-1')).toHaveLength(2);
    const daemonStatus = (await (await fetch(`${d.url}/status`)).json()) as { agents: Array<{ name: string; budget?: unknown }> };
    expect(daemonStatus.agents.find((x) => x.name === 'alpha')!.budget).toEqual({ daily: 5, spent_today: 8, left: 0 });
    expect(daemonStatus.agents.find((x) => x.name === 'beta')!.budget).toBeUndefined();
    // Commands still answer with the budget spent.
    a.send('/status');
    const after = await waitFor(async () => (await a.finals(5)).at(-1));
    expect(after.text).toContain('Budget today: 0.00 of 5.00 left');
  });
});
