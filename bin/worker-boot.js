// Worker threads start here: register tsx in the worker, then load the TypeScript module named in workerData.
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';
register();
await import(workerData.module);
