import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { reloadRefusal } from '../../../src/daemon/reload.js';
import { configProblems } from '../../helpers/config.js';
import { kinds } from '../../helpers/kinds.js';

const web = `[[channels]]\nid = "web"\ntype = "webchat"\n`;
const load = (observe: string) => parseConfig(`${observe}\n${web}`, 'daemon.config.toml', kinds, {});

describe('[observe]', () => {
  it('is off by default: no endpoint, service "channeld", every message sampled', () => {
    expect(load('').config.observe).toEqual({ service_name: 'channeld', sample_ratio: 1 });
  });

  it('takes an OTLP/HTTP endpoint, a service name and a sample ratio', () => {
    const c = load('[observe]\notlp_endpoint = "http://127.0.0.1:4318"\nservice_name = "bots"\nsample_ratio = 0.25').config.observe;
    expect(c).toEqual({ otlp_endpoint: 'http://127.0.0.1:4318', service_name: 'bots', sample_ratio: 0.25 });
  });

  it('refuses an endpoint that is not http(s), a ratio past 1 and an unknown key, each with its line', () => {
    const problems = configProblems(`[observe]\notlp_endpoint = "grpc://collector:4317"\nsample_ratio = 1.5\nservice = "x"\n${web}`);
    expect(problems.find((p) => p.includes('observe.otlp_endpoint'))).toMatch(
      /^daemon\.config\.toml:2:\d+: observe\.otlp_endpoint: write an http:\/\/ or https:\/\/ URL/,
    );
    expect(problems.find((p) => p.includes('observe.sample_ratio'))).toMatch(/^daemon\.config\.toml:3:\d+: /);
    expect(problems.find((p) => p.includes('unknown key "service"'))).toMatch(/^daemon\.config\.toml:4:\d+: /);
  });

  it('a change is refused by a reload: the tracer is set up once, at start', () => {
    const before = load('');
    const after = load('[observe]\notlp_endpoint = "http://127.0.0.1:4318"');
    expect(reloadRefusal(before, after)).toContain('[observe] changed');
    expect(reloadRefusal(before, load(''))).toBeUndefined();
  });
});
