// Past one machine: two gateway processes behind a real nginx that hashes on the session header
// (`hash $http_x_session_id consistent`). Every call of a session lands on one replica, each
// replica writes its own capture folder, and the two folders read as one run give the same
// trajectories as a single gateway's capture of the same sessions.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REFERENCE_IDS } from './support/engine-reference.ts';
import { type ReceivedCall, startEngineStandin } from './support/engine-standin.ts';
import {
  answerOf,
  checkJson,
  exited,
  MODEL,
  post,
  readCapture,
  spawnGateway,
  tempDir,
} from './support/gateway-harness.ts';
import { waitFor } from './support/wait.ts';

const NGINX = '/usr/sbin/nginx';
const haveNginx = fs.existsSync(NGINX);
const SESSIONS = Array.from({ length: 10 }, (_, i) => `episode-${i}`);
const TURNS = 3;

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/**
 * Each session's turn k generates the same ids whichever gateway asks (the turn counted from the
 * engine's own call log); episode-3 splits " will" as a model may, so one session has a break.
 */
function scripted(call: ReceivedCall, log: readonly ReceivedCall[]) {
  const session = call.headers['x-session-id'] ?? '?';
  const turn = log.filter((c) => c !== call && c.generated && c.headers['x-session-id'] === session).length;
  if (session === 'episode-3' && turn === 0) return { ids: [40, 289, 483, 990, 432, 13, REFERENCE_IDS.imEnd] };
  return { text: `${session} answer ${turn}.` };
}

async function runSessions(base: string): Promise<void> {
  await Promise.all(
    SESSIONS.map(async (session) => {
      const messages: Record<string, unknown>[] = [{ role: 'user', content: `Start ${session}.` }];
      for (let t = 0; t < TURNS; t++) {
        const a = await post(`${base}/v1/chat/completions`, { model: MODEL, messages }, { 'x-session-id': session });
        expect(a.status, JSON.stringify(a.json)).toBe(200);
        messages.push(
          { role: 'assistant', content: a.json.choices[0].message.content },
          { role: 'user', content: `Next ${t}.` },
        );
      }
    }),
  );
}

/** What a run says about each session, independent of the files it came from. */
function bySession(report: {
  trajectories: { id: string; format: string; findings: unknown[]; limitations: string[] }[];
}) {
  return Object.fromEntries(
    report.trajectories.map((t) => [t.id, { format: t.format, findings: t.findings, limitations: t.limitations }]),
  );
}

describe.skipIf(!haveNginx && !process.env.CI)(`replicas behind nginx (needs ${NGINX})`, () => {
  const cleanup: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const c of cleanup.reverse()) await c();
  });

  it('keeps each session on one replica, and the replicas’ captures read as one run equal to a single gateway’s', async () => {
    // The calls of the current run (the replicas', then the single gateway's) count the turns.
    let runStart = 0;
    const log: { calls: readonly ReceivedCall[] } = { calls: [] };
    const engine = await startEngineStandin({
      engine: 'vllm',
      model: MODEL,
      script: (c) => scripted(c, log.calls.slice(runStart)),
    });
    log.calls = engine.calls;
    cleanup.push(() => engine.close());

    const dirs = { r1: tempDir('gw-r1'), r2: tempDir('gw-r2'), single: tempDir('gw-single') };
    const stops: (() => Promise<unknown>)[] = [];
    const gw = async (name: 'r1' | 'r2' | 'single') => {
      const g = await spawnGateway([
        '--upstream',
        engine.url,
        '--listen',
        '127.0.0.1:0',
        '--out',
        dirs[name],
        '--mode',
        'guard',
        '--replica',
        name,
      ]);
      const stop = async () => {
        if (g.child.exitCode === null && g.child.signalCode === null) g.child.kill('SIGTERM');
        await exited(g.child);
      };
      stops.push(stop);
      cleanup.push(stop);
      return g;
    };
    const [r1, r2] = await Promise.all([gw('r1'), gw('r2')]);

    const prefix = tempDir('nginx');
    for (const d of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) fs.mkdirSync(path.join(prefix, d));
    const port = await freePort();
    const conf = path.join(prefix, 'nginx.conf');
    fs.writeFileSync(
      conf,
      `worker_processes 1;
pid ${prefix}/nginx.pid;
error_log ${prefix}/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path ${prefix}/body;
  proxy_temp_path ${prefix}/proxy;
  fastcgi_temp_path ${prefix}/fastcgi;
  uwsgi_temp_path ${prefix}/uwsgi;
  scgi_temp_path ${prefix}/scgi;
  upstream gateways {
    hash $http_x_session_id consistent;
    server ${new URL(r1.url).host};
    server ${new URL(r2.url).host};
  }
  server {
    listen 127.0.0.1:${port};
    client_max_body_size 64m;
    location / {
      proxy_pass http://gateways;
      proxy_http_version 1.1;
      proxy_buffering off;
      proxy_read_timeout 600s;
    }
  }
}
`,
    );
    const nginx = spawn(NGINX, ['-p', prefix, '-e', path.join(prefix, 'error.log'), '-c', conf, '-g', 'daemon off;'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let nginxErr = '';
    nginx.stderr!.on('data', (d: Buffer) => {
      nginxErr += d.toString();
    });
    const stopNginx = async () => {
      if (nginx.exitCode === null && nginx.signalCode === null) nginx.kill('SIGQUIT');
      await exited(nginx);
    };
    cleanup.push(stopNginx);
    const base = `http://127.0.0.1:${port}`;
    await waitFor('nginx to answer', async () => {
      if (nginx.exitCode !== null) throw new Error(`nginx did not start: ${nginxErr}`);
      return fetch(`${base}/metrics`).then(
        (r) => r.ok,
        () => false,
      );
    });

    await runSessions(base);
    runStart = engine.calls.length;
    const single = await gw('single');
    await runSessions(single.url);
    // SIGTERM: each gateway flushes and closes its capture.
    await stopNginx();
    for (const stop of stops) await stop();

    // Every call of a session went to one replica, and both replicas served sessions.
    const replicaOf = new Map<string, Set<string>>();
    for (const name of ['r1', 'r2'] as const)
      for (const line of readCapture(dirs[name])) {
        expect(line.gateway.replica).toBe(name);
        const set = replicaOf.get(line.session_id) ?? new Set();
        set.add(name);
        replicaOf.set(line.session_id, set);
      }
    expect([...replicaOf.keys()].sort()).toEqual([...SESSIONS].sort());
    for (const [session, replicas] of replicaOf) expect([session, replicas.size]).toEqual([session, 1]);
    const served = new Set([...replicaOf.values()].flatMap((s) => [...s]));
    expect(served).toEqual(new Set(['r1', 'r2']));

    // The same calls, token for token.
    const calls = (dirs: string[]) => {
      const out: Record<string, unknown[]> = {};
      for (const d of dirs)
        for (const l of readCapture(d))
          (out[l.session_id] ??= []).push([answerOf(l).prompt_token_ids, answerOf(l).choices[0]!.token_ids]);
      return out;
    };
    expect(calls([dirs.r1, dirs.r2])).toEqual(calls([dirs.single]));

    // And `check` reads the two folders as the single gateway's run.
    const both = checkJson([dirs.r1, dirs.r2]);
    const one = checkJson([dirs.single]);
    expect(both.status).toBe(one.status);
    expect(bySession(both.report)).toEqual(bySession(one.report));
    expect(Object.keys(bySession(one.report)).sort()).toEqual([...SESSIONS].sort());
    expect(bySession(one.report)['episode-3']!.findings).toContainEqual(
      expect.objectContaining({ kind: 'prefix_break', cause: 'retokenized', turn: 1 }),
    );
  });
});
