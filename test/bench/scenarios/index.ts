import type { Scenario } from '../report.js';
import { drafts } from './drafts.js';
import { overhead } from './overhead.js';
import { peer } from './peer.js';
import { throughput } from './throughput.js';
import { latency } from './latency.js';
import { memory } from './memory.js';
import { reload } from './reload.js';
import { startup } from './startup.js';
import { streaming } from './streaming.js';
import { load } from './load.js';
import { cluster } from './cluster.js';
import { clusterModel } from './cluster-model.js';
import { clusterSustained } from './cluster-sustained.js';

/** Every scenario `npm run bench` runs, in order. */
export const scenarios: Record<string, Scenario> = {
  throughput,
  peer,
  latency,
  overhead,
  drafts,
  streaming,
  memory,
  startup,
  reload,
  load,
  cluster,
  'cluster-model': clusterModel,
  'cluster-sustained': clusterSustained,
};
