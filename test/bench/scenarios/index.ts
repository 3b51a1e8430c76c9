import type { Scenario } from '../report.js';
import { drafts } from './drafts.js';
import { overhead } from './overhead.js';
import { throughput } from './throughput.js';

/** Every scenario `npm run bench` runs, in order. */
export const scenarios: Record<string, Scenario> = { throughput, overhead, drafts };
