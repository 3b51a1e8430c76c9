// Preloaded (`node --import`) into a process the allocation bench measures: V8's sampling heap
// profiler, counting every sampled allocation (also what the next collection frees, which is
// most of a message's), started on SIGURG and written on SIGWINCH to
// <tmpdir>/channeld-alloc-<pid>.json. Signals, not a timer: the bench starts it after the
// warm-up and stops it once the timed messages are answered. The daemon uses neither signal.
// Imported as alloc-sampler.mjs?survivors, it leaves out what a young-generation collection
// frees: what is left is what outlived one, promoted to the old generation, whose marking by
// the major collections is done on V8's helper threads.
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const session = new Session();
session.connect();
const post = (method, params) => new Promise((resolve, reject) => session.post(method, params, (err, r) => (err ? reject(err) : resolve(r))));
const survivors = new URL(import.meta.url).searchParams.has('survivors');
const sampling = { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: !survivors };
const fail = (err) => process.stderr.write(`alloc-sampler: ${err}\n`);

process.on('SIGURG', () => {
  post('HeapProfiler.startSampling', sampling).catch(fail);
});
process.on('SIGWINCH', () => {
  post('HeapProfiler.stopSampling')
    .then(({ profile }) => writeFileSync(join(tmpdir(), `channeld-alloc-${process.pid}.json`), JSON.stringify(profile)))
    .catch(fail);
});
