import { describe, expect, it } from 'vitest';
import { createLogger, scrub } from '../../../src/observe/logger.js';
import { isLoopback } from '../../../src/util/http.js';
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
    for (const secret of ['plain-token-value', 'nested-token-value', 'xoxb-1234567890-abcdef', 'abc.def.ghi', telegramToken, configured, 'xapp-1-A0123456789']) {
      expect(out).not.toContain(secret);
    }
    expect(out).toContain('[redacted]');
    expect(sink.lines).toHaveLength(6);
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
