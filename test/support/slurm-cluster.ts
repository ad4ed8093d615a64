// A one-node Slurm cluster in a folder of its own, for running docs/distributed.md's Slurm recipes
// as a team would (test/slurm.test.ts, bench/slurm.ts). Debian's slurmctld, slurmd and munge, run
// as root in the foreground so each daemon is stopped by its own pid, even when a step fails:
//
// - munged refuses a key that is not 0600 and a socket folder others cannot enter: the folder is
//   made world-executable (0755) and the key written by `mungekey -c`;
// - the node line is `slurmd -C`'s (a RealMemory or CPU count above the machine's leaves the node
//   INVAL, and sbatch then waits for ever), and slurmd is told the node name that line gives;
// - ProctrackType=proctrack/linuxproc and TaskPlugin=task/none: the cgroup defaults fail every job
//   on a machine without systemd while the node still shows idle;
// - the controller and node ports are free ports, so a cluster on the machine is left alone;
// - every wait has a deadline, and a daemon that does not stop on SIGTERM is killed.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { waitFor } from './wait.ts';

/** The programs a cluster needs (Debian: slurmctld slurmd slurm-client munge). */
export const SLURM_PROGRAMS = ['munged', 'mungekey', 'slurmctld', 'slurmd', 'sbatch', 'srun', 'scontrol', 'squeue'];

/** Why a cluster cannot be brought up here (a program missing, not root), or undefined when it can. */
export function slurmUnavailable(): string | undefined {
  const missing = SLURM_PROGRAMS.filter((p) => spawnSync('sh', ['-c', `command -v ${p}`]).status !== 0);
  if (missing.length > 0)
    return `${missing.join(', ')} not found: install Debian's slurmctld slurmd slurm-client munge (.ci/run does)`;
  if (process.getuid?.() !== 0) return 'slurmd runs jobs as their user and must run as root';
  return undefined;
}

export interface JobState {
  /** `JOBID` or `JOBID_TASK` for a task of an array. */
  id: string;
  state: string;
  exitCode: string;
  restarts: number;
}

/** A free TCP port on 127.0.0.1 (asked of the kernel, then released). */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

export class SlurmCluster {
  /** The environment the cluster's client commands (and a submitting shell) need: SLURM_CONF. */
  readonly env: Record<string, string>;
  private readonly daemons: { name: string; child: ChildProcess }[] = [];

  private constructor(
    readonly dir: string,
    readonly node: string,
  ) {
    this.env = { SLURM_CONF: path.join(dir, 'slurm.conf') };
  }

  /** Bring a cluster up in `dir` (made if missing); stops what it started if any step fails. */
  static async start(dir: string, opts: { timeoutMs?: number } = {}): Promise<SlurmCluster> {
    const timeoutMs = opts.timeoutMs ?? 30_000;
    const why = slurmUnavailable();
    if (why) throw new Error(`cannot bring a Slurm cluster up: ${why}`);
    fs.mkdirSync(dir, { recursive: true });
    fs.chmodSync(dir, 0o755); // munged refuses a socket folder others cannot enter, and any folder above it
    for (let up = path.dirname(path.resolve(dir)); ; up = path.dirname(up)) {
      if ((fs.statSync(up).mode & 0o001) === 0)
        throw new Error(`munged needs every folder above its socket enterable by all: chmod o+x ${up}`);
      if (path.dirname(up) === up) break;
    }
    for (const d of ['state', 'spool', 'log']) fs.mkdirSync(path.join(dir, d), { recursive: true });

    // The node as slurmd sees it: its first line is the node's configuration, then "UpTime=…".
    const probe = spawnSync('slurmd', ['-C'], { encoding: 'utf8', timeout: timeoutMs });
    const nodeLine = probe.stdout.split('\n').find((l) => l.startsWith('NodeName='));
    if (probe.status !== 0 || !nodeLine) throw new Error(`slurmd -C gave no node line: ${probe.stderr}`);
    const node = /^NodeName=(\S+)/.exec(nodeLine)![1]!;
    const cluster = new SlurmCluster(dir, node);
    try {
      const key = path.join(dir, 'munge.key');
      const made = spawnSync('mungekey', ['-c', '-k', key], { encoding: 'utf8', timeout: timeoutMs });
      if (made.status !== 0) throw new Error(`mungekey -c failed: ${made.stderr}`);
      fs.chmodSync(key, 0o600);
      const socket = path.join(dir, 'munge.socket');
      cluster.daemon('munged', [
        '--foreground',
        `--key-file=${key}`,
        `--socket=${socket}`,
        `--pid-file=${path.join(dir, 'munged.pid')}`,
        `--log-file=${path.join(dir, 'log', 'munged.log')}`,
        `--seed-file=${path.join(dir, 'munged.seed')}`,
      ]);
      await waitFor('munged to open its socket', () => fs.existsSync(socket), { timeoutMs, everyMs: 50 });

      const ctldPort = await freePort();
      let nodePort = await freePort();
      while (nodePort === ctldPort) nodePort = await freePort();
      const at = (f: string) => path.join(dir, f);
      fs.writeFileSync(at('plugstack.conf'), '');
      fs.writeFileSync(
        at('slurm.conf'),
        [
          'ClusterName=rollscope',
          // slurmctld runs only where its host name is the controller's; the address is given, so it need not resolve.
          `SlurmctldHost=${node}(127.0.0.1)`,
          `SlurmctldPort=${ctldPort}`,
          `SlurmdPort=${nodePort}`,
          'SlurmUser=root',
          'SlurmdUser=root',
          'AuthType=auth/munge',
          `AuthInfo=socket=${socket}`,
          'CredType=cred/munge',
          `StateSaveLocation=${at('state')}`,
          `SlurmdSpoolDir=${at('spool')}`,
          `SlurmctldPidFile=${at('slurmctld.pid')}`,
          `SlurmdPidFile=${at('slurmd.pid')}`,
          `SlurmctldLogFile=${at('log/slurmctld.log')}`,
          `SlurmdLogFile=${at('log/slurmd.log')}`,
          `PlugStackConfig=${at('plugstack.conf')}`,
          'ProctrackType=proctrack/linuxproc',
          'TaskPlugin=task/none',
          'JobAcctGatherType=jobacct_gather/none',
          'AccountingStorageType=accounting_storage/none',
          'JobCompType=jobcomp/none',
          'SwitchType=switch/none',
          'MpiDefault=none',
          'SchedulerType=sched/backfill',
          'SelectType=select/cons_tres',
          'SelectTypeParameters=CR_CPU',
          'ReturnToService=2',
          // A requeued or cancelled task gets SIGTERM, and SIGKILL this many seconds later.
          'KillWait=5',
          // Finished jobs stay listed long enough to read their states.
          'MinJobAge=600',
          `${nodeLine.trim()} NodeAddr=127.0.0.1 State=UNKNOWN`,
          // The jobs of the recipes ask for 2 CPUs each: on a machine of 2, up to 8 of them share them.
          `PartitionName=main Nodes=${node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8`,
          '',
        ].join('\n'),
      );
      cluster.daemon('slurmctld', ['-D', '-i']);
      cluster.daemon('slurmd', ['-D', '-N', node]);
      await waitFor(
        `node ${node} to be idle (sinfo; logs in ${at('log')})`,
        () => {
          const r = cluster.run('sinfo', ['-h', '-n', node, '-o', '%t']);
          const state = r.status === 0 ? r.stdout.trim() : '';
          if (/inval|drain/.test(state))
            throw new Error(`node ${node} is ${state}: ${cluster.run('scontrol', ['show', 'node', node]).stdout}`);
          return state === 'idle';
        },
        { timeoutMs, everyMs: 100 },
      );
      return cluster;
    } catch (e) {
      await cluster.stop();
      throw e;
    }
  }

  private daemon(name: string, args: string[]): void {
    const child = spawn(name, args, { env: { ...process.env, ...this.env }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (d) => {
      stderr = (stderr + d).slice(-4000);
    });
    child.on('exit', (code, signal) => {
      if (!this.stopping && code !== 0)
        fs.appendFileSync(path.join(this.dir, 'log', 'exits.log'), `${name} exited ${code ?? signal}: ${stderr}\n`);
    });
    this.daemons.push({ name, child });
  }

  private stopping = false;

  /** Run a client command against this cluster (synchronously, with a deadline). */
  run(cmd: string, args: string[], env: Record<string, string> = {}, timeoutMs = 30_000) {
    return spawnSync(cmd, args, { encoding: 'utf8', env: { ...process.env, ...this.env, ...env }, timeout: timeoutMs });
  }

  /** `scontrol ARGS`, throwing with its message when it fails. */
  scontrol(...args: string[]): string {
    const r = this.run('scontrol', args);
    if (r.status !== 0) throw new Error(`scontrol ${args.join(' ')}: ${r.stderr || r.stdout}`);
    return r.stdout;
  }

  /** The state of a job, or of each task of an array (`scontrol show job -o` lists them all). */
  jobs(id: string): JobState[] {
    const out = this.scontrol('show', 'job', '-o', id);
    return out
      .split('\n')
      .filter((l) => l.startsWith('JobId='))
      .map((l) => {
        const field = (k: string) => new RegExp(`(?:^| )${k}=(\\S*)`).exec(l)?.[1] ?? '';
        const task = field('ArrayTaskId');
        const arrayJob = field('ArrayJobId');
        return {
          id: task && arrayJob ? `${arrayJob}_${task}` : field('JobId'),
          state: field('JobState'),
          exitCode: field('ExitCode'),
          restarts: Number(field('Restarts') || 0),
        };
      });
  }

  /** Wait until every job and task of `ids` has left the queue (finished in any state), then their states. */
  async finish(ids: readonly string[], timeoutMs = 120_000): Promise<JobState[]> {
    await waitFor(
      `jobs ${ids.join(', ')} to finish (squeue)`,
      () => {
        const r = this.run('squeue', ['-h', '-j', ids.join(','), '-o', '%i %T']);
        return r.status === 0 && r.stdout.trim() === '';
      },
      { timeoutMs, everyMs: 200 },
    );
    return ids.flatMap((id) => this.jobs(id));
  }

  /** Cancel every job, wait for the queue to empty, and stop every daemon by its pid (idempotent). */
  async stop(timeoutMs = 20_000): Promise<void> {
    if (this.daemons.some((d) => d.name === 'slurmctld' && d.child.exitCode === null)) {
      this.run('scancel', ['--full', '--user', 'root'], {}, 10_000);
      await waitFor(
        'the cancelled jobs to leave the queue',
        () => {
          const r = this.run('squeue', ['-h', '-o', '%i'], {}, 10_000);
          return r.status !== 0 || r.stdout.trim() === '';
        },
        { timeoutMs, everyMs: 200 },
      ).catch(() => undefined);
    }
    this.stopping = true;
    // Node first, then controller, then munge: each still has what it talks to while it stops.
    for (const d of [...this.daemons].reverse()) await stopChild(d.child, timeoutMs);
  }
}

/** SIGTERM, then SIGKILL when it has not exited by the deadline; resolves once the process has exited. */
async function stopChild(child: ChildProcess, timeoutMs: number): Promise<void> {
  const gone = () => child.exitCode !== null || child.signalCode !== null;
  if (gone()) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  await waitFor(`${child.spawnfile} to exit on SIGTERM`, gone, { timeoutMs, everyMs: 50 }).catch(() =>
    child.kill('SIGKILL'),
  );
  await exited;
}
