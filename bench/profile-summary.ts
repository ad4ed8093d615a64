// Summarise a V8 .cpuprofile (node --cpu-prof): self time by function and by file, the share of
// garbage collection, and the total. What bench/README.md quotes when a target is missed.
// `node bin/tsx.js bench/profile-summary.ts FILE.cpuprofile [--top 25] [--inclusive]`
import fs from 'node:fs';
import path from 'node:path';
import { isMain } from './lib.ts';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface ProfileSummary {
  totalMs: number;
  byFunction: { name: string; ms: number; share: number }[];
  byFile: { name: string; ms: number; share: number }[];
  /** Time with the function anywhere on the stack (its callees included), each sample counted once per function. */
  inclusive: { name: string; ms: number; share: number }[];
}

const shortFile = (url: string): string => {
  if (!url) return '(native)';
  const p = url.replace(/^file:\/\//, '');
  const nm = p.lastIndexOf('node_modules/');
  if (nm >= 0)
    return p
      .slice(nm + 'node_modules/'.length)
      .split('/')
      .slice(0, 2)
      .join('/');
  const repo = p.search(/\/(server|bench|app|bin)\//);
  return repo >= 0 ? p.slice(repo + 1) : path.basename(p);
};

export function summarizeProfile(profile: CpuProfile): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => {
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const nameOf = (id: number): string => {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    return url ? `${functionName || '(anonymous)'} ${shortFile(url)}:${lineNumber + 1}` : functionName;
  };
  const fn = new Map<string, number>();
  const file = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let total = 0;
  for (const [id, us] of selfUs) {
    const name = nameOf(id);
    const f = shortFile(byId.get(id)!.callFrame.url);
    fn.set(name, (fn.get(name) ?? 0) + us);
    file.set(f, (file.get(f) ?? 0) + us);
    const onStack = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) onStack.add(nameOf(at));
    for (const n of onStack) inclusive.set(n, (inclusive.get(n) ?? 0) + us);
    total += us;
  }
  const list = (m: Map<string, number>) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .map(([name, us]) => ({ name, ms: Math.round(us / 1000), share: Math.round((us / total) * 1000) / 10 }));
  return { totalMs: Math.round(total / 1000), byFunction: list(fn), byFile: list(file), inclusive: list(inclusive) };
}

function cli(argv: string[]): void {
  const topAt = argv.indexOf('--top');
  const top = topAt >= 0 ? Number(argv[topAt + 1]) : 25;
  for (const f of argv.filter((a) => a.endsWith('.cpuprofile'))) {
    const s = summarizeProfile(JSON.parse(fs.readFileSync(f, 'utf8')) as CpuProfile);
    console.log(`${path.basename(f)}: ${s.totalMs} ms sampled`);
    console.log('  self time by file:');
    for (const x of s.byFile.slice(0, 12)) console.log(`    ${String(x.share).padStart(5)} %  ${x.ms} ms  ${x.name}`);
    console.log('  self time by function:');
    for (const x of s.byFunction.slice(0, top))
      console.log(`    ${String(x.share).padStart(5)} %  ${x.ms} ms  ${x.name}`);
    if (argv.includes('--inclusive')) {
      console.log('  time with callees (inclusive), by function:');
      for (const x of s.inclusive.filter((x) => x.name.includes(' ')).slice(0, top))
        console.log(`    ${String(x.share).padStart(5)} %  ${x.ms} ms  ${x.name}`);
    }
  }
}

if (isMain(import.meta.url)) cli(process.argv.slice(2));
