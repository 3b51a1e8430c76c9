import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { operatorConfig, tempDir } from '../helpers/operator.js';
import { withDaemonProcess } from '../helpers/process.js';

const preload = join(import.meta.dirname, '../fixtures/operator/warn-on-listen.mjs');

describe('the daemon process output', () => {
  it("routes Node's process warnings through the logger: one warn line each, stdout and stderr stay JSON", async () => {
    const p = withDaemonProcess(operatorConfig(tempDir('warn')), { ADMIN: 'x' }, ['--import', preload]);
    await p.url();
    // The warnings come while the HTTP server starts; "ready" is logged after start.
    await waitFor(() => p.lines.some((l) => l.msg === 'ready'), 15_000);
    const warns = p.lines.filter((l) => l.level === 40 && typeof l.msg === 'string' && l.msg.startsWith('node: '));
    expect(warns.map((w) => (w.warning as { code: string }).code).sort()).toEqual(['DEP0040', 'DEP0169']);
    // DaemonProcess keeps a line that is not JSON as { msg } alone: none may exist.
    expect(p.lines.filter((l) => !('level' in l))).toEqual([]);
  });
});
