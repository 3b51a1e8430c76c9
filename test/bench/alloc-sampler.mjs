// Preloaded (`node --import`) into a process the allocation bench measures: V8's sampling heap
// profiler, counting every sampled allocation (also what the next collection frees, which is
// most of a message's), started on SIGURG and written on SIGWINCH to
// <tmpdir>/channeld-alloc-<pid>.json. Signals, not a timer: the bench starts it after the
// warm-up and stops it once the timed messages are answered. The daemon uses neither signal.
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const session = new Session();
session.connect();
const post = (method, params) => new Promise((resolve, reject) => session.post(method, params, (err, r) => (err ? reject(err) : resolve(r))));
const fail = (err) => process.stderr.write(`alloc-sampler: ${err}\n`);

process.on('SIGURG', () => {
  post('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true }).catch(fail);
});
process.on('SIGWINCH', () => {
  post('HeapProfiler.stopSampling')
    .then(({ profile }) => writeFileSync(join(tmpdir(), `channeld-alloc-${process.pid}.json`), JSON.stringify(profile)))
    .catch(fail);
});
