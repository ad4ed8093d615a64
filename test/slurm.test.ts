// docs/distributed.md's Slurm recipes, copied out of the page and submitted unmodified to a real
// one-node Slurm cluster (test/support/slurm-cluster.ts) over a run folder of every format: the
// check array with its afterok merge (one task suspended mid-run and requeued), the srun form,
// the export array with its manifest merge, and submissions without RUN or OUT. Under CI the
// cluster must come up: a machine without Slurm fails here instead of skipping.
//
// The page's scripts ask 2 CPUs a task. The cluster here has the machine's cores (2 in CI) and lets
// 8 jobs share them (OverSubscribe=FORCE:8); the submitting shell sets N = SHARDS, as the page
// says, and lets the srun job place its 4 tasks on 2 CPUs with SBATCH_OVERCOMMIT (sbatch's own
// variable for --overcommit). The scripts are the page's, unmodified.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MergedManifest } from '../server/cli/merge.ts';
import { readManifest } from '../server/export/manifest.ts';
import { ROLLSCOPE_CLI, rollscopeOnPath, writeFixtureRun } from './support/fixture-run.ts';
import { writeRecipes } from './support/recipes.ts';
import { SlurmCluster, slurmUnavailable, type JobState } from './support/slurm-cluster.ts';
import { waitFor } from './support/wait.ts';

const unavailable = slurmUnavailable();
const EPOCH = '1767225600';
/** Shards of the check and export arrays (SHARDS). */
const N = 3;

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

function exec(cmd: string, args: string[], opts: { cwd: string; env: Record<string, string | undefined> }) {
  return new Promise<Ran>((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env as NodeJS.ProcessEnv });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe.skipIf(unavailable !== undefined && !process.env.CI)(
  "docs/distributed.md's Slurm recipes on a one-node Slurm cluster",
  () => {
    let tmp: string;
    let run: string;
    let scripts: string;
    let cluster: SlurmCluster | undefined;
    let whole: string;
    let wholeStatus: number | null;
    let single: string;
    let db: DuckDBInstance;
    let con: DuckDBConnection;

    /** The environment of a shell that submits: the cluster's, rollscope on PATH, and what the test adds. */
    const submitEnv = (extra: Record<string, string | undefined>) => {
      const env: Record<string, string | undefined> = {
        ...process.env,
        ...cluster!.env,
        NO_COLOR: '1',
        PATH: `${path.join(tmp, 'bin')}${path.delimiter}${process.env.PATH}`,
        SBATCH_OUTPUT: path.join(tmp, 'logs', '%x-%j.out'),
        ...extra,
      };
      for (const k of Object.keys(env)) if (env[k] === undefined) delete env[k];
      return env;
    };
    const submit = (cmd: string, args: string[], extra: Record<string, string | undefined>) =>
      exec(cmd, args, { cwd: scripts, env: submitEnv(extra) });
    const query = async (sql: string) =>
      (await con.runAndReadAll(sql)).getRowObjectsJson() as Record<string, unknown>[];
    const sq = (p: string) => p.split(path.sep).join('/').replaceAll("'", "''");
    const logs = () =>
      fs
        .readdirSync(path.join(tmp, 'logs'))
        .map((f) => `--- ${f}\n${fs.readFileSync(path.join(tmp, 'logs', f), 'utf8')}`)
        .join('\n');
    /** Job states with the task logs, for a failure's message. */
    const explain = (states: JobState[]) => `${JSON.stringify(states, null, 1)}\n${logs()}`;

    beforeAll(async () => {
      if (unavailable) throw new Error(`the Slurm test runs in CI: ${unavailable}`);
      tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-slurm-'));
      fs.chmodSync(tmp, 0o755); // the cluster's munge socket is in it
      run = path.join(tmp, 'run');
      scripts = path.join(tmp, 'scripts');
      for (const d of [scripts, path.join(tmp, 'logs'), path.join(tmp, 'single')]) fs.mkdirSync(d);
      writeFixtureRun(run);
      rollscopeOnPath(tmp);
      writeRecipes(scripts, [
        'slurm',
        'slurm-merge',
        'slurm-submit',
        'slurm-srun',
        'slurm-export',
        'slurm-export-merge',
        'slurm-export-submit',
      ]);
      single = path.join(tmp, 'single', 'batch.parquet');
      const env = { ...process.env, NO_COLOR: '1', SOURCE_DATE_EPOCH: EPOCH };
      // The unsharded references, while the cluster comes up.
      const [, checked, exported] = await Promise.all([
        SlurmCluster.start(path.join(tmp, 'cluster')).then((c) => {
          cluster = c;
        }),
        exec(process.execPath, [ROLLSCOPE_CLI, 'check', run, '--json', '--workers', '0', '--out', 'whole.json'], {
          cwd: tmp,
          env,
        }),
        exec(process.execPath, [ROLLSCOPE_CLI, 'export', run, '--out', single, '--workers', '0'], { cwd: tmp, env }),
      ]);
      expect(checked.stderr).toBe('');
      expect(exported.stderr).toBe('');
      expect(exported.code).toBe(0);
      wholeStatus = checked.code;
      whole = fs.readFileSync(path.join(tmp, 'whole.json'), 'utf8');
      db = await DuckDBInstance.create(':memory:');
      con = await db.connect();
    }, 120_000);

    afterAll(async () => {
      con?.closeSync();
      // Every daemon is stopped by its pid, whatever failed before.
      await cluster?.stop();
      if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
    }, 60_000);

    it('the check array and its afterok merge give the unsharded report byte for byte, with a task requeued mid-run', async () => {
      const out = path.join(tmp, 'check');
      const submitted = await submit('bash', ['submit-check.sh'], { RUN: run, OUT: out, SHARDS: String(N) });
      expect(submitted.stderr).toBe('');
      expect(submitted.code).toBe(0);
      const [array, merge] = submitted.stdout.trim().split(/\s+/);
      expect(array).toMatch(/^\d+$/);
      expect(merge).toMatch(/^\d+$/);

      // Task 1, once it is writing its report: stopped where it is (SIGSTOP), then requeued (SIGCONT and
      // SIGTERM; it starts again from scratch). Slurm holds a requeued suspended job, and delays a
      // requeued job's start by a while: it is released and let start at once.
      const task = `${array}_1`;
      const reports = path.join(out, 'reports');
      await waitFor(
        `task ${task} to start writing its report`,
        () => {
          const writing = fs.existsSync(reports) && fs.readdirSync(reports).some((f) => f.startsWith('.shard-1.json.'));
          return writing && cluster!.jobs(task)[0]?.state === 'RUNNING';
        },
        { timeoutMs: 60_000, everyMs: 10 },
      );
      cluster!.scontrol('suspend', task);
      expect(cluster!.jobs(task)[0]!.state).toBe('SUSPENDED');
      expect(fs.existsSync(path.join(reports, 'shard-1.json'))).toBe(false);
      cluster!.scontrol('requeue', task);
      await waitFor('the requeued task to be pending', () => cluster!.jobs(task)[0]?.state === 'PENDING', {
        timeoutMs: 30_000,
      });
      cluster!.scontrol('release', task);
      cluster!.scontrol('update', `JobId=${task}`, 'StartTime=now');

      const states = await cluster!.finish([array!, merge!]);
      const tasks = states
        .filter((s) => s.id.startsWith(`${array}_`))
        .sort((a, b) => Number(a.id.split('_')[1]) - Number(b.id.split('_')[1]));
      expect(
        tasks.map((s) => [s.id, s.state, s.exitCode]),
        explain(states),
      ).toEqual(Array.from({ length: N }, (_, k) => [`${array}_${k}`, 'COMPLETED', '0:0']));
      expect(tasks.find((s) => s.id === task)!.restarts).toBe(1);
      // The merge job exits as check over the whole run would (2 here: torch/hostile.pt cannot be read).
      expect(wholeStatus).toBe(2);
      const merged = states.find((s) => s.id === merge)!;
      expect([merged.state, merged.exitCode], explain(states)).toEqual(['FAILED', `${wholeStatus}:0`]);
      expect(fs.readFileSync(path.join(out, 'report.json'), 'utf8')).toBe(whole);
      // Each shard read its share: no task's report is the whole run. The killed attempt left at most a
      // hidden temporary file (SIGKILL), never a partial report.
      const sizes = Array.from(
        { length: N },
        (_, k) => JSON.parse(fs.readFileSync(path.join(reports, `shard-${k}.json`), 'utf8')).trajectories.length,
      );
      expect(sizes.filter((n) => n > 0).length).toBeGreaterThan(1);
      const left = fs.readdirSync(reports);
      expect(left.filter((f) => !f.startsWith('.')).sort()).toEqual(
        Array.from({ length: N }, (_, k) => `shard-${k}.json`),
      );
      for (const f of left.filter((x) => x.startsWith('.')))
        expect(f).toMatch(/^\.shard-1\.json\.\d+\.[0-9a-f]+\.tmp$/);
    }, 240_000);

    it('srun -n N in one allocation, then the merge in the same job, gives the same report', async () => {
      const out = path.join(tmp, 'srun');
      const submitted = await submit('sbatch', ['--parsable', 'rollscope-check-srun.sbatch'], {
        RUN: run,
        OUT: out,
        SBATCH_OVERCOMMIT: '1',
      });
      expect(submitted.stderr).toBe('');
      const job = submitted.stdout.trim();
      const states = await cluster!.finish([job]);
      expect([states[0]!.state, states[0]!.exitCode], explain(states)).toEqual(['FAILED', `${wholeStatus}:0`]);
      expect(fs.readdirSync(path.join(out, 'reports')).sort()).toEqual([
        'shard-0.json',
        'shard-1.json',
        'shard-2.json',
        'shard-3.json',
      ]);
      expect(fs.readFileSync(path.join(out, 'report.json'), 'utf8')).toBe(whole);
    }, 240_000);

    it('the export array and its manifest merge hold exactly the rows and counts of an unsharded export', async () => {
      const out = path.join(tmp, 'export');
      const submitted = await submit('bash', ['submit-export.sh'], {
        RUN: run,
        OUT: out,
        SHARDS: String(N),
        SOURCE_DATE_EPOCH: undefined,
      });
      expect(submitted.stderr).toBe('');
      expect(submitted.code).toBe(0);
      const [array, merge] = submitted.stdout.trim().split(/\s+/);
      const states = await cluster!.finish([array!, merge!]);
      expect(
        states.map((s) => [s.state, s.exitCode]),
        explain(states),
      ).toEqual(Array.from({ length: N + 1 }, () => ['COMPLETED', '0:0']));

      const rows = (from: string, hive: boolean) =>
        query(
          `SELECT id, source.file AS file, source.line AS line, md5(tokens::VARCHAR) AS tokens,
                  md5(loss_mask::VARCHAR) AS mask, md5(position_ids::VARCHAR) AS pos, md5(images::VARCHAR) AS images
           FROM read_parquet('${sq(from)}'${hive ? ', hive_partitioning = true' : ''}) ORDER BY id`,
        );
      const sharded = await rows(path.join(out, 'dataset', '**', '*.parquet'), true);
      const unsharded = await rows(single, false);
      expect(unsharded.length).toBeGreaterThan(10);
      expect(sharded).toEqual(unsharded);

      const merged = MergedManifest.parse(JSON.parse(fs.readFileSync(path.join(out, 'manifest.json'), 'utf8')));
      const wholeManifest = readManifest(`${single}.manifest.json`);
      expect(merged.counts).toEqual(wholeManifest.counts);
      expect(merged.parts.reduce((n, p) => n + p.rows, 0)).toBe(wholeManifest.counts.exported);
      expect(merged.inputs.map((i) => [i.file, i.trajectories])).toEqual(
        wholeManifest.inputs.map((i) => [i.file, i.trajectories]),
      );
    }, 240_000);

    it('refuses to run without RUN or OUT: the submit script submits nothing, a task fails and writes nothing', async () => {
      const out = path.join(tmp, 'refused');
      const noRun = await submit('bash', ['submit-check.sh'], { RUN: undefined, OUT: out });
      expect(noRun.code).not.toBe(0);
      expect(noRun.stderr).toMatch(/RUN/);
      expect(noRun.stdout).toBe('');
      // The task script on its own, submitted without one of them (sbatch passes only exported variables).
      const jobs: string[] = [];
      for (const unset of ['RUN', 'OUT']) {
        const r = await submit('sbatch', ['--parsable', '--array=0', 'rollscope-check.sbatch'], {
          RUN: run,
          OUT: out,
          [unset]: undefined,
          SBATCH_OUTPUT: path.join(tmp, 'logs', `refused-${unset}-%j.out`),
        });
        expect(r.stderr).toBe('');
        jobs.push(r.stdout.trim());
      }
      const states = await cluster!.finish(jobs);
      expect(states.map((s) => [s.state, s.exitCode])).toEqual([
        ['FAILED', '1:0'],
        ['FAILED', '1:0'],
      ]);
      expect(fs.existsSync(out)).toBe(false);
      for (const unset of ['RUN', 'OUT']) {
        const log = fs.readdirSync(path.join(tmp, 'logs')).find((f) => f.startsWith(`refused-${unset}-`))!;
        expect(fs.readFileSync(path.join(tmp, 'logs', log), 'utf8')).toMatch(new RegExp(`${unset}: export ${unset}`));
      }
    }, 120_000);
  },
);
