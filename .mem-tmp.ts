import { exportRun } from './server/pipeline/export-run.ts';
let max = { rss: 0, heapUsed: 0, external: 0, arrayBuffers: 0 };
const t = setInterval(() => {
  const m = process.memoryUsage();
  for (const k of Object.keys(max) as (keyof typeof max)[]) max[k] = Math.max(max[k], m[k]);
}, 20);
const rg = Number(process.env.RG ?? 512);
await exportRun([process.argv[2]!], { out: process.argv[3]!, format: 'parquet', force: true, workers: 0, rowGroupRows: rg });
clearInterval(t);
console.log(Object.fromEntries(Object.entries(max).map(([k, v]) => [k, Math.round(v / 1e6)])));
