// Sharded runs (docs/distributed.md), through the real CLI in child processes over a run folder
// of fixtures in every format: `check --shard K/N` reports folded by `merge` equal the unsharded
// `check --json` byte for byte for N = 1, 3 and 7; a partitioned sharded export holds exactly the
// rows of the unsharded one and DuckDB reads it hive-partitioned; the findings Parquet answers
// DuckDB queries; a shard killed with SIGKILL and rerun writes the same bytes; images by
// reference are written once and read back.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCheck } from '../server/cli/check.ts';
import { CheckReport, checkExitStatus, newSummary } from '../server/report/check-report.ts';
import { checkPaths } from '../server/pipeline.ts';
import { parseShard } from '../server/pipeline/shard.ts';
import { mergeExport, mergeManifests, MergedManifest } from '../server/cli/merge.ts';
import { mergeCheckReports, MergeError } from '../server/report/merge.ts';
import { readManifest, RejectEntry } from '../server/export/manifest.ts';
import { readParquetRows } from '../server/export/parquet.ts';
import { exportRun } from '../server/pipeline/export-run.ts';
import { ExportRow } from '../server/export/row-schema.ts';
import { recipe as docRecipe } from './support/recipes.ts';
import { rollscopeOnPath, writeFixtureRun } from './support/fixture-run.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const EPOCH = { SOURCE_DATE_EPOCH: '1767225600' };

let tmp: string;
let run: string;
let db: DuckDBInstance;
let con: DuckDBConnection;

interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function cli(args: string[], env: Record<string, string> = {}, onStart?: (pid: number) => void): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'rollscope.js'), ...args], {
      cwd: tmp,
      env: { ...process.env, NO_COLOR: '1', ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('spawn', () => onStart?.(child.pid!));
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

function sha256(file: string): string {
  return createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

async function query(sql: string): Promise<Record<string, unknown>[]> {
  return (await con.runAndReadAll(sql)).getRowObjectsJson() as Record<string, unknown>[];
}

/** The text of a recipe of docs/distributed.md. */
const recipe = (name: string): string => docRecipe(name).text;

/** The container script of the Kubernetes Job: the block scalar after `- |`, dedented. */
function containerScript(yaml: string): string {
  const lines = yaml.split('\n');
  const at = lines.findIndex((l) => /^\s*- \|\s*$/.test(l));
  const indent = lines[at]!.search(/\S/);
  const body: string[] = [];
  for (const l of lines.slice(at + 1)) {
    if (l.trim() !== '' && l.search(/\S/) <= indent) break;
    body.push(l);
  }
  const cut = Math.min(...body.filter((l) => l.trim()).map((l) => l.search(/\S/)));
  return body.map((l) => l.slice(cut)).join('\n');
}

/** Run a shell script as a scheduler would, with `rollscope` on PATH. */
function shell(shellName: 'bash' | 'sh', script: string, env: Record<string, string>): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(shellName, ['-c', script], {
      cwd: tmp,
      env: {
        ...process.env,
        NO_COLOR: '1',
        PATH: `${path.join(tmp, 'bin')}${path.delimiter}${process.env.PATH}`,
        ...env,
      },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

const sq = (p: string) => p.split(path.sep).join('/').replaceAll("'", "''");

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-distributed-'));
  run = path.join(tmp, 'run');
  writeFixtureRun(run);
  // `rollscope` on PATH for the recipes' scripts.
  rollscopeOnPath(tmp);
  db = await DuckDBInstance.create(':memory:');
  con = await db.connect();
});

afterAll(() => {
  con?.closeSync();
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe('shard selection', () => {
  it('parses K/N with K from 0 to N−1 and refuses anything else', () => {
    expect(parseShard('3/7')).toEqual({ index: 3, count: 7 });
    expect(parseShard('0/1')).toEqual({ index: 0, count: 1 });
    for (const bad of ['7/7', '1/0', '-1/3', '1', 'a/b', '1/2/3']) expect(() => parseShard(bad), bad).toThrow();
  });

  it('a shard that owns none of the trajectories still writes a valid empty report, and merge restores the whole', async () => {
    const file = path.join(run, 'vllm', 'tito.jsonl');
    const whole: string[] = [];
    const wholeStatus = await runCheck([file], { json: true, workers: 0 }, { write: (s) => whole.push(s) });
    const n = JSON.parse(whole.join('')).trajectories.length as number;
    const count = n + 2; // more shards than trajectories: at least two own none
    const reports = [];
    let empty = 0;
    for (let index = 0; index < count; index++) {
      const out: string[] = [];
      await runCheck([file], { json: true, workers: 0, shard: { index, count } }, { write: (s) => out.push(s) });
      const report = CheckReport.parse(JSON.parse(out.join('')));
      if (report.trajectories.length === 0) {
        empty++;
        expect(report.summary.trajectories).toBe(0);
      }
      reports.push({ name: `shard-${index}`, doc: JSON.parse(out.join('')) });
    }
    expect(empty).toBeGreaterThanOrEqual(2);
    expect(`${JSON.stringify(mergeCheckReports(reports))}\n`).toBe(whole.join(''));
    expect(wholeStatus).toBe(0);
  });
});

describe('merge of check reports', () => {
  const entry = (id: string, line: number) => ({
    id,
    source: { file: 'run/a.jsonl', line },
    format: 'vllm',
    model: null,
    profile: 'qwen2.5-vl',
    findings: [],
    limitations: [],
  });
  const summary = (trajectories: number, unreadable: number) => ({
    ...newSummary(),
    trajectories,
    clean: trajectories,
    unreadableRecords: unreadable,
  });

  const part = (index: number, splits: { order: number; start: number; end: number }[]) => ({
    index,
    count: 2,
    run: 'r',
    files: 1,
    splits: splits.map((x) => ({ ...x, bytes: 100 })),
  });

  it('orders the entries of every shard by where they were read, and keys repeated ids in that order', () => {
    const failed = { file: 'run/a.jsonl', line: 2, message: 'cannot analyze trajectory b: boom' };
    const shard0 = {
      version: 1,
      trajectories: [entry('a', 1), entry('c', 3)],
      errors: [],
      summary: summary(2, 0),
      shard: {
        ...part(0, [{ order: 0, start: 0, end: 50 }]),
        positions: {
          trajectories: [
            [0, 0, 0],
            [0, 0, 2],
          ],
          errors: [],
        },
        members: [null, null],
      },
    };
    const shard1 = {
      version: 1,
      trajectories: [entry('a', 4)],
      errors: [failed],
      summary: summary(1, 1),
      shard: {
        ...part(1, [{ order: 0, start: 50, end: 100 }]),
        positions: { trajectories: [[0, 50, 1]], errors: [[0, 50, 0]] },
        members: [null],
      },
    };
    const merged = mergeCheckReports([
      { name: 'shard-1.json', doc: shard1 },
      { name: 'shard-0.json', doc: shard0 },
    ]);
    expect(merged.trajectories.map((t) => `${t.id}@${t.source.line}`)).toEqual(['a@1', 'c@3', 'a#2@4']);
    expect(merged.errors).toEqual([failed]);
    expect(merged.summary).toMatchObject({ trajectories: 3, clean: 3, unreadableRecords: 1 });
    expect(checkExitStatus(merged)).toBe(1);
    const gap = { ...shard1, shard: { ...shard1.shard, splits: [{ order: 0, start: 60, end: 100, bytes: 100 }] } };
    expect(() =>
      mergeCheckReports([
        { name: 'a', doc: shard0 },
        { name: 'b', doc: gap },
      ]),
    ).toThrow(/bytes 50–60 of file 0 were read by no shard/);
    const twice = {
      ...shard1,
      shard: { ...shard1.shard, positions: { trajectories: [[0, 0, 2]], errors: [[0, 50, 0]] } },
    };
    expect(() =>
      mergeCheckReports([
        { name: 'a', doc: shard0 },
        { name: 'b', doc: twice },
      ]),
    ).toThrow(/two trajectories read at \[0,0,2\]/);
    const otherRun = { ...shard1, shard: { ...shard1.shard, run: 'other' } };
    expect(() =>
      mergeCheckReports([
        { name: 'a', doc: shard0 },
        { name: 'b', doc: otherRun },
      ]),
    ).toThrow(/different files/);
  });
});

describe('check --shard K/N over a run in every format, folded by merge', () => {
  let whole: string;
  let wholeStatus: number | null;

  beforeAll(async () => {
    const r = await cli([
      'check',
      run,
      '--json',
      '--workers',
      '0',
      '--out',
      'whole.json',
      '--findings-parquet',
      'whole-findings.parquet',
    ]);
    expect(r.stderr).toBe('');
    wholeStatus = r.code;
    whole = fs.readFileSync(path.join(tmp, 'whole.json'), 'utf8');
  }, 120_000);

  /** Shard K of N the way each recipe runs it: N = 1 by hand, 3 as the Slurm array, 7 as the Kubernetes Indexed Job. */
  const runShards = async (count: number, dir: string): Promise<Ran[]> => {
    if (count === 3)
      return Promise.all(
        Array.from({ length: count }, (_, k) =>
          shell('bash', recipe('slurm'), {
            RUN: run,
            OUT: dir,
            SLURM_ARRAY_TASK_ID: String(k),
            SLURM_ARRAY_TASK_COUNT: String(count),
            SLURM_CPUS_PER_TASK: '0', // the main thread only: seven shards share two cores here
          }),
        ),
      );
    if (count === 7)
      return Promise.all(
        Array.from({ length: count }, (_, k) =>
          shell('sh', containerScript(recipe('kubernetes')), {
            RUN: run,
            OUT: dir,
            SHARDS: String(count),
            JOB_COMPLETION_INDEX: String(k),
            WORKERS: '0',
          }),
        ),
      );
    fs.mkdirSync(path.join(dir, 'reports'), { recursive: true });
    fs.mkdirSync(path.join(dir, 'findings'), { recursive: true });
    return [
      await cli([
        'check',
        run,
        '--json',
        '--workers',
        '0',
        '--shard',
        '0/1',
        '--out',
        path.join(dir, 'reports', 'shard-0.json'),
        '--findings-parquet',
        path.join(dir, 'findings', 'shard-0.parquet'),
      ]),
    ];
  };

  it.each([1, 3, 7])(
    'N = %i: merge of the shard reports is the unsharded report, byte for byte, with its exit status',
    async (count) => {
      const dir = path.join(tmp, `shards-${count}`);
      const ran = await runShards(count, dir);
      const reports = Array.from({ length: count }, (_, k) => path.join(dir, 'reports', `shard-${k}.json`));
      ran.forEach((r, k) => {
        expect(r.stderr).toBe('');
        const own = checkExitStatus(CheckReport.parse(JSON.parse(fs.readFileSync(reports[k]!, 'utf8'))));
        // By hand: check's own status. The recipes: done once the report is written (findings are a result).
        expect(r.code).toBe(count === 1 ? own : 0);
      });
      const sizes = reports.map((f) => CheckReport.parse(JSON.parse(fs.readFileSync(f, 'utf8'))).trajectories.length);
      if (count > 1) expect(sizes.filter((n) => n > 0).length).toBeGreaterThan(1); // the work really is split
      if (count === 3) {
        // The Slurm recipe's merge step.
        const step = await shell('bash', recipe('slurm-merge'), { OUT: dir });
        expect(step.stderr).toBe('');
        expect(step.code).toBe(wholeStatus);
        expect(fs.readFileSync(path.join(dir, 'report.json'), 'utf8')).toBe(whole);
      } else {
        const merged = await cli(['merge', ...reports, '--json']);
        expect(merged.stderr).toBe('');
        expect(merged.stdout).toBe(whole);
        expect(merged.code).toBe(wholeStatus);
      }
      expect(wholeStatus).toBe(2); // torch/hostile.pt cannot be read at all (and there are error findings)
      // The members of a group with findings list them too: the bytes compared above include them.
      const report = CheckReport.parse(JSON.parse(whole));
      const flagged = report.groups.filter((g) => g.findings.length > 0);
      expect(flagged.length).toBeGreaterThan(0);
      for (const g of flagged)
        for (const t of report.trajectories.filter((x) => x.group === g.id && x.step === g.step))
          expect(t.findings.slice(-g.findings.length), t.id).toEqual(g.findings);

      // One Parquet row per trajectory finding across the shards, typed as documented. A group's
      // findings are known once merge has every sample (they are in the merged report's `groups`),
      // and a shard names a trajectory by the id its data states (merge gives the `ID#2` keys).
      const glob = sq(path.join(dir, 'findings', 'shard-*.parquet'));
      const byKind = Object.fromEntries(
        (await query(`SELECT kind, count(*)::INTEGER AS n FROM read_parquet('${glob}') GROUP BY kind`)).map((r) => [
          r.kind,
          r.n,
        ]),
      );
      const summary = CheckReport.parse(JSON.parse(whole)).summary;
      expect(byKind).toEqual(
        Object.fromEntries(Object.entries(summary.findingsByKind).filter(([k, n]) => n > 0 && k !== 'group')),
      );
      const cols = `file, line, step, rank, "group", kind, cause, severity, turn, "index", stream, message`;
      const wholeFindings = `read_parquet('${sq(path.join(tmp, 'whole-findings.parquet'))}') WHERE kind <> 'group'`;
      const sharded = await query(`SELECT ${cols} FROM read_parquet('${glob}') ORDER BY ALL`);
      const unsharded = await query(`SELECT ${cols} FROM ${wholeFindings} ORDER BY ALL`);
      expect(sharded).toEqual(unsharded);
      // Where the run states an id once, the shard's id is the run-wide key.
      const repeated = `SELECT regexp_replace(trajectory_id, '#.*$', '') FROM ${wholeFindings} AND trajectory_id LIKE '%#%'`;
      const once = `trajectory_id NOT LIKE '%#%' AND trajectory_id NOT IN (${repeated})`;
      expect(
        await query(`SELECT trajectory_id, ${cols} FROM read_parquet('${glob}') WHERE ${once} ORDER BY ALL`),
      ).toEqual(await query(`SELECT trajectory_id, ${cols} FROM ${wholeFindings} AND ${once} ORDER BY ALL`));
    },
    180_000,
  );

  it('the findings Parquet has the documented schema and answers a query by step and kind', async () => {
    const file = sq(path.join(tmp, 'whole-findings.parquet'));
    const types = Object.fromEntries(
      (await query(`DESCRIBE SELECT * FROM read_parquet('${file}')`)).map((o) => [o.column_name, o.column_type]),
    );
    expect(types).toEqual({
      trajectory_id: 'VARCHAR',
      file: 'VARCHAR',
      line: 'INTEGER',
      format: 'VARCHAR',
      step: 'INTEGER',
      rank: 'INTEGER',
      group: 'VARCHAR',
      kind: 'VARCHAR',
      cause: 'VARCHAR',
      severity: 'VARCHAR',
      turn: 'INTEGER',
      index: 'INTEGER',
      stream: 'VARCHAR',
      message: 'VARCHAR',
    });
    // The query of docs/distributed.md.
    const rows = await query(
      `SELECT step, kind, count(*)::INTEGER AS findings, count(DISTINCT trajectory_id)::INTEGER AS trajectories
       FROM read_parquet('${file}') WHERE severity = 'error' GROUP BY ALL ORDER BY ALL`,
    );
    const report = CheckReport.parse(JSON.parse(whole));
    const errorFindings = report.trajectories.flatMap((t) =>
      (t.findings as { severity: string }[]).filter((f) => f.severity === 'error'),
    );
    expect(rows.reduce((n, r) => n + Number(r.findings), 0)).toBe(errorFindings.length);
  });

  it('a shard killed with SIGKILL mid-run leaves no report, and its rerun writes the same bytes', async () => {
    const dir = path.join(tmp, 'killed');
    fs.mkdirSync(dir);
    const out = path.join(dir, 'report-1.json');
    const args = ['check', run, '--json', '--workers', '0', '--shard', '1/3', '--out', out];
    let tempSeen = false;
    const killed = await cli(args, {}, (pid) => {
      const poll = setInterval(() => {
        if (fs.readdirSync(dir).some((f) => f.startsWith('.report-1.json.') && f.endsWith('.tmp'))) {
          tempSeen = true;
          clearInterval(poll);
          process.kill(pid, 'SIGKILL');
        }
      }, 5);
    });
    expect(killed.signal).toBe('SIGKILL');
    expect(tempSeen).toBe(true);
    expect(fs.existsSync(out)).toBe(false);
    // On analysis threads this time: the shard's bytes do not depend on them.
    const again = await cli(args.map((x, i) => (args[i - 1] === '--workers' ? '2' : x)));
    expect(again.stderr).toBe('');
    expect(fs.readFileSync(out, 'utf8')).toBe(
      fs.readFileSync(path.join(tmp, 'shards-3', 'reports', 'shard-1.json'), 'utf8'),
    );
  }, 120_000);

  it('merge refuses reports that are not all the shards of one run, and mixed kinds', async () => {
    const r = (k: number, n = 3) => ({
      name: `report-${k}.json`,
      doc: JSON.parse(fs.readFileSync(path.join(tmp, `shards-${n}`, 'reports', `shard-${k}.json`), 'utf8')),
    });
    expect(() => mergeCheckReports([r(0), r(1)])).toThrow(/2\/3 missing/);
    expect(() => mergeCheckReports([r(0), r(1), r(1)])).toThrow(/both shard 1\/3/);
    expect(() => mergeCheckReports([r(0), r(1), r(2, 7)])).toThrow(MergeError);
    expect(() => mergeCheckReports([r(0), { name: 'whole.json', doc: JSON.parse(whole) }])).toThrow(/whole run/);
    const manifest = path.join(tmp, 'some.manifest.json');
    fs.writeFileSync(manifest, '{"schema_version":1,"output":{},"counts":{}}');
    const mixed = await cli(['merge', path.join(tmp, 'shards-3', 'reports', 'shard-0.json'), manifest]);
    expect(mixed.code).toBe(2);
    expect(mixed.stderr).toMatch(/cannot merge check reports with export manifests/);
  });
});

describe('export --shard K/N --partition step,rank', () => {
  const count = 3;
  let dataset: string;
  let single: string;

  beforeAll(async () => {
    dataset = path.join(tmp, 'dataset');
    single = path.join(tmp, 'single', 'batch.parquet');
    fs.mkdirSync(path.dirname(single));
    const ran = await Promise.all([
      cli(['export', run, '--out', single, '--workers', '0', '--json'], EPOCH),
      ...Array.from({ length: count }, (_, k) =>
        cli(
          ['export', run, '--out', dataset, '--partition', 'step,rank', '--shard', `${k}/${count}`, '--workers', '0'],
          EPOCH,
        ),
      ),
    ]);
    for (const r of ran) {
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
    }
    // The shards' rows hold the ids their data states until merge gives the run-wide keys.
    const manifests = Array.from({ length: count }, (_, k) => path.join(dataset, `_part-${k}.manifest.json`));
    const r = await cli(['merge', ...manifests, '--out', path.join(tmp, 'merged-manifest.json')]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  }, 180_000);

  it('writes hive-style folders that DuckDB reads with step and rank, holding exactly the unsharded rows', async () => {
    const glob = sq(path.join(dataset, '**', '*.parquet'));
    const sharded = await query(
      `SELECT id, source.file AS file, source.line AS line, md5(tokens::VARCHAR) AS tokens, md5(position_ids::VARCHAR) AS pos, step, rank
       FROM read_parquet('${glob}', hive_partitioning = true) ORDER BY id`,
    );
    const unsharded = await query(
      `SELECT id, source.file AS file, source.line AS line, md5(tokens::VARCHAR) AS tokens, md5(position_ids::VARCHAR) AS pos
       FROM read_parquet('${sq(single)}') ORDER BY id`,
    );
    expect(unsharded.length).toBeGreaterThan(10);
    expect(sharded.map(({ step: _s, rank: _r, ...row }) => row)).toEqual(unsharded);
    // prime-rl's step_<n>/rank_<r>.bin name the partitions; data that states neither is NULL.
    const prime = sharded.filter((r) => String(r.file).includes(`${path.sep}prime-rl${path.sep}rollouts${path.sep}`));
    expect(prime.length).toBeGreaterThan(0);
    for (const r of prime) expect([r.step, r.rank]).toEqual(['0', '0']);
    expect(sharded.some((r) => r.step === null)).toBe(true);
    const types = Object.fromEntries(
      (await query(`DESCRIBE SELECT step, rank FROM read_parquet('${glob}', hive_partitioning = true)`)).map((o) => [
        o.column_name,
        o.column_type,
      ]),
    );
    expect(types).toEqual({ step: 'BIGINT', rank: 'BIGINT' });
  });

  it('each shard exports the trajectories of its own input splits, a GRPO group wherever its samples were read', async () => {
    const rows = await query(
      `SELECT source.file AS file, list(DISTINCT regexp_extract(filename, 'part-(\\d+)', 1)) AS shards
       FROM read_parquet('${sq(path.join(dataset, '**', '*.parquet'))}', filename = true) GROUP BY ALL`,
    );
    expect(rows.length).toBeGreaterThan(5);
    // Every file of this run is no larger than a share, so each is read whole by one shard.
    for (const r of rows) expect(r.shards as unknown[], String(r.file)).toHaveLength(1);
    expect(new Set(rows.map((r) => (r.shards as string[])[0])).size).toBe(count);
  });

  it('merge of the shard manifests lists every part with its sha256, and the counts add up to the unsharded ones', async () => {
    const manifests = Array.from({ length: count }, (_, k) => path.join(dataset, `_part-${k}.manifest.json`));
    const merged = MergedManifest.parse(JSON.parse(fs.readFileSync(path.join(tmp, 'merged-manifest.json'), 'utf8')));
    const whole = readManifest(`${single}.manifest.json`);
    expect(merged.counts).toEqual(whole.counts);
    expect(merged.counts.read).toBe(merged.counts.exported + merged.counts.rejected);
    expect(merged.inputs.map((i) => [i.file, i.sha256, i.trajectories])).toEqual(
      whole.inputs.map((i) => [i.file, i.sha256, i.trajectories]),
    );
    const onDisk = fs
      .readdirSync(dataset, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.parquet'))
      .map((f) => path.join(dataset, f))
      .sort();
    expect(merged.parts.map((p) => path.join(tmp, p.file)).sort()).toEqual(onDisk);
    for (const p of merged.parts) expect(sha256(path.join(tmp, p.file))).toBe(p.sha256);
    expect(merged.parts.reduce((n, p) => n + p.rows, 0)).toBe(whole.counts.exported);
    // The rejects of the shards are the rejects of the whole export.
    const rejects = (file: string) =>
      fs
        .readFileSync(file, 'utf8')
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((l) => RejectEntry.parse(JSON.parse(l)))
        .map((e) => `${e.source.file}:${e.source.line}:${e.id}:${e.reasons.join(',')}`)
        .sort();
    expect(merged.rejects.flatMap((x) => rejects(path.join(tmp, x.file))).sort()).toEqual(
      rejects(`${single}.rejects.jsonl`),
    );
    expect(() =>
      mergeManifests(
        manifests.slice(1).map((name) => ({ name, doc: JSON.parse(fs.readFileSync(name, 'utf8')) })),
        tmp,
      ),
    ).toThrow(/0\/3 missing/);
  });

  it('a killed export shard rerun from scratch writes the same bytes into every file it owns', async () => {
    const owned = () =>
      fs
        .readdirSync(dataset, { recursive: true, encoding: 'utf8' })
        .filter((f) => /(^|[\\/])_?part-1\./.test(f))
        .sort();
    const before = Object.fromEntries(owned().map((f) => [f, sha256(path.join(dataset, f))]));
    expect(Object.keys(before).length).toBeGreaterThan(2);
    const args = ['export', run, '--out', dataset, '--partition', 'step,rank', '--shard', `1/${count}`];
    const killed = await cli([...args, '--workers', '0', '--force'], EPOCH, (pid) => {
      const poll = setInterval(() => {
        if (fs.readdirSync(dataset).some((f) => f.startsWith('._part-1.rejects.jsonl.') && f.endsWith('.tmp'))) {
          clearInterval(poll);
          process.kill(pid, 'SIGKILL');
        }
      }, 5);
    });
    expect(killed.signal).toBe('SIGKILL');
    const again = await cli([...args, '--workers', '0', '--force'], EPOCH);
    expect(again.stderr).toBe('');
    expect(again.code).toBe(0);
    // Its rows hold the ids their data states again: merge gives the keys again, the same bytes.
    const manifests = Array.from({ length: count }, (_, k) => path.join(dataset, `_part-${k}.manifest.json`));
    const merged = await cli(['merge', ...manifests, '--out', path.join(tmp, 'merged-manifest.json')]);
    expect(merged.stderr).toBe('');
    expect(Object.fromEntries(owned().map((f) => [f, sha256(path.join(dataset, f))]))).toEqual(before);
  }, 120_000);
});

describe('export --shard K/N into one file per shard', () => {
  it('merge of the shard manifests accounts for every row and reject of the unsharded export', async () => {
    const dir = path.join(tmp, 'file-shards');
    fs.mkdirSync(dir);
    const input = [path.join(run, 'vllm')]; // chained chat calls: one trajectory over several records
    const whole = await exportRun(input, { out: path.join(dir, 'whole.jsonl'), workers: 0 });
    const count = 3;
    const docs: { name: string; doc: unknown }[] = [];
    const ids: string[] = [];
    for (let index = 0; index < count; index++) {
      const r = await exportRun(input, {
        out: path.join(dir, `batch-${index}.jsonl`),
        workers: 0,
        shard: { index, count },
      });
      expect(r.manifest.shard).toEqual({ index, count });
      docs.push({ name: r.manifestFile, doc: JSON.parse(fs.readFileSync(r.manifestFile, 'utf8')) });
    }
    // The rows' run-wide keys come from merge.
    const merged = await mergeExport(docs, dir);
    for (let index = 0; index < count; index++)
      for (const line of fs
        .readFileSync(path.join(dir, `batch-${index}.jsonl`), 'utf8')
        .split('\n')
        .filter(Boolean))
        ids.push(JSON.parse(line).id);
    expect(merged.counts).toEqual(whole.manifest.counts);
    expect(merged.parts.map((p) => p.file)).toEqual(['batch-0.jsonl', 'batch-1.jsonl', 'batch-2.jsonl']);
    for (const p of merged.parts) expect(sha256(path.join(dir, p.file))).toBe(p.sha256);
    const wholeIds = fs
      .readFileSync(whole.out, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l).id as string);
    expect(wholeIds.length).toBeGreaterThan(3);
    expect(ids.sort()).toEqual(wholeIds.sort());
    expect(() =>
      mergeManifests([...docs, { name: 'whole', doc: JSON.parse(fs.readFileSync(whole.manifestFile, 'utf8')) }], dir),
    ).toThrow(/whole export/);
  }, 120_000);
});

describe('export --images ref', () => {
  it('writes each distinct image once under images/, named by its sha256, and the batch reads back with its images', async () => {
    const out = path.join(tmp, 'by-ref', 'batch.parquet');
    fs.mkdirSync(path.dirname(out));
    const r = await cli(['export', path.join(run, 'slime'), '--out', out, '--images', 'ref', '--workers', '0']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const rows = (await readParquetRows(fs.readFileSync(out))).map((x) => ExportRow.parse(x));
    const refs = rows.flatMap((row) => row.images);
    expect(refs.length).toBeGreaterThan(rows.length); // the interleaved groups repeat the same image
    const stored = fs.readdirSync(path.join(tmp, 'by-ref', 'images'));
    expect(stored.length).toBe(new Set(refs.map((i) => i.sha256)).size);
    for (const img of refs) {
      expect(img.bytes).toBeNull();
      expect(img.path).toBeNull();
      expect(img.uri).toMatch(new RegExp(`^images/${img.sha256}\\.png$`));
      expect(sha256(path.join(tmp, 'by-ref', img.uri!))).toBe(img.sha256);
    }
    expect(rows.every((row) => row.image_grid_thw.length === row.images.length)).toBe(true);
    const types = Object.fromEntries(
      (await query(`DESCRIBE SELECT images FROM read_parquet('${sq(out)}')`)).map((o) => [
        o.column_name,
        o.column_type,
      ]),
    );
    expect(types.images).toMatch(/uri VARCHAR\)\[\]$/);

    // Read back: the export-rows importer finds every image by its uri, and the rows check clean.
    let read = 0;
    for await (const ev of checkPaths([out], { workers: 0 })) {
      expect(ev.type).not.toBe('error');
      if (ev.type !== 'trajectory') continue;
      read++;
      const t = ev.checked.trajectory;
      expect(t.images.length).toBeGreaterThan(0);
      for (const img of t.images) expect(img.unavailable).toBeUndefined();
      expect(ev.checked.findings.filter((f) => f.severity === 'error')).toEqual([]);
    }
    expect(read).toBe(rows.length);
  }, 120_000);
});
