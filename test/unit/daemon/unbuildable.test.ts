import { describe, expect, it } from 'vitest';
import { unbuildable } from '../../../src/daemon/channels.js';
import { userText } from '../../../src/contracts/errors.js';

describe('a channel factory that cannot be loaded', () => {
  it('a missing module (an upgrade removed the running build’s chunk) is BUILD_MODULE_MISSING, never the platform’s server error', () => {
    // What Node's ESM loader throws (vitest's own loader throws another error, so it is built here).
    const err = Object.assign(
      new Error("Cannot find module '/opt/channeld/dist/builds/a/factory-7QX2.js' imported from /opt/channeld/dist/builds/a/channeld.js"),
      {
        code: 'ERR_MODULE_NOT_FOUND',
      },
    );
    const coded = unbuildable(err);
    expect(coded.code).toBe('BUILD_MODULE_MISSING');
    expect(coded.retryable).toBe(false);
    expect(coded.message).not.toContain('server error');
    expect(userText('BUILD_MODULE_MISSING')).toMatch(/restart channeld/);
  });
});
