import { describe, expect, it } from 'vitest';
import { createLogger, scrub } from '../../../src/observe/logger.js';
import { isLoopback } from '../../../src/util/http-helpers.js';
import { LogSink } from '../../helpers/daemon.js';

describe('log redaction', () => {
  const telegramToken = '123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw';
  const configured = 'my-very-own-admin-secret';

  it('a token never appears in log output, whatever field or message carries it', () => {
    const sink = new LogSink();
    const log = createLogger({ level: 'debug', destination: sink, pretty: false, secrets: () => [configured] });
    log.info({ token: 'plain-token-value' }, 'connecting');
    log.info({ channel: { token: 'nested-token-value', botToken: 'xoxb-1234567890-abcdef' } }, 'nested');
    log.info({ headers: { authorization: 'Bearer abc.def.ghi' } }, 'request');
    log.warn(`request to https://api.telegram.org/bot${telegramToken}/getMe failed`);
    log.error({ err: new Error(`auth failed with ${configured}`) }, 'boom');
    log.info({ url: 'x', note: 'xapp-1-A0123456789-abcdef' }, 'slack app token in a string');
    const out = sink.text;
    for (const secret of [
      'plain-token-value',
      'nested-token-value',
      'xoxb-1234567890-abcdef',
      'abc.def.ghi',
      telegramToken,
      configured,
      'xapp-1-A0123456789',
    ]) {
      expect(out).not.toContain(secret);
    }
    expect(out).toContain('[redacted]');
    expect(sink.lines).toHaveLength(6);
  });

  it('censors secret keys at any depth and whatever their value, and leaves text that merely names them alone', () => {
    const sink = new LogSink();
    const log = createLogger({ level: 'debug', destination: sink, pretty: false });
    log.info({ a: { b: { c: { password: 'deep-password-value' } } } }, 'three levels down');
    log.info({ channel: { token: { value: 'object-token-value' } } }, 'an object under a secret key');
    log.info({ apiKey: 123456789, list: [{ secret: 'in-an-array-value' }] }, 'a number and an array');
    log.info({ note: 'the "token": field is documented' }, 'set "password": in the config');
    const e = sink.entries();
    expect(sink.text).not.toMatch(/deep-password-value|object-token-value|123456789|in-an-array-value/);
    expect((e[0]!.a as any).b.c.password).toBe('[redacted]');
    expect((e[1]!.channel as any).token).toBe('[redacted]');
    expect(e[2]!.apiKey).toBe('[redacted]');
    expect(e[3]!.note).toBe('the "token": field is documented');
    expect(e[3]!.msg).toBe('set "password": in the config');
  });

  it('scrub leaves ordinary text alone', () => {
    expect(scrub('{"msg":"channel web connected","attempts":3}', ['short'])).toBe('{"msg":"channel web connected","attempts":3}');
  });
});

describe('isLoopback', () => {
  it('knows IPv4, IPv6 and mapped loopback addresses', () => {
    for (const a of ['127.0.0.1', '127.5.0.9', '::1', '::ffff:127.0.0.1']) expect(isLoopback(a)).toBe(true);
    for (const a of ['10.0.0.1', '192.168.1.2', '::ffff:10.0.0.1', 'fe80::1', undefined]) expect(isLoopback(a)).toBe(false);
  });
});
