// A run naming `Qwen/Qwen3.5-9B` is checked with the model folder the Hugging Face cache holds for it,
// found offline as transformers finds it (docs/reference/models/README.md#where-a-model-comes-from):
// the same findings as with `--model FOLDER`, under `HF_HUB_CACHE`, `HF_HOME` and the default
// `~/.cache/huggingface/hub`, the report naming the folder it used. The folder is the moved-ids
// Qwen3.5 folder (test/support/moved-ids.ts: Qwen3.5's ids, its model_type, Qwen3-VL's template).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCheck } from '../server/cli/check.ts';
import { CheckReport } from '../server/report/check-report.ts';
import { loadProfile } from '../server/profiles/profile.ts';
import { cachedModelFolder, hubCacheDir } from '../server/profiles/model-source.ts';
import { remapJsonText, writeMovedFolder } from './support/moved-ids.ts';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
const MODEL = 'Qwen/Qwen3.5-9B';
const LIMITATION = `${MODEL}: no built-in profile; pass --model FOLDER`;
const REV = 'c0ffee0123456789abcdef0123456789abcdef01';
/** Qwen3.5's ids for the tokens the fixtures hold (transformers' Qwen3_5Config defaults from 248044 on). */
const QWEN35_IDS = new Map(Array.from({ length: 26 }, (_, k) => [151643 + k, 248044 + k] as const));

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-hf-cache-'));
const saved = { ...process.env };
afterAll(() => {
  for (const k of ['HF_HUB_CACHE', 'HUGGINGFACE_HUB_CACHE', 'HF_HOME', 'XDG_CACHE_HOME', 'HOME'] as const) {
    if (saved[k] === undefined) delete process.env[k];
    else process.env[k] = saved[k];
  }
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** Lays the model out in a hub cache folder as huggingface_hub does: refs/main → snapshots/<rev>/. */
function layOut(hub: string): string {
  const repo = path.join(hub, 'models--Qwen--Qwen3.5-9B');
  const snapshot = path.join(repo, 'snapshots', REV);
  writeMovedFolder(snapshot, loadProfile('qwen3-vl'), QWEN35_IDS, { template: 'jinja', modelType: 'qwen3_5' });
  fs.mkdirSync(path.join(repo, 'refs'), { recursive: true });
  fs.writeFileSync(path.join(repo, 'refs', 'main'), REV);
  return snapshot;
}

/** Where the cache variables point: only the one given, the others unset. */
function environment(vars: { HF_HUB_CACHE?: string; HF_HOME?: string; HOME?: string }): void {
  for (const k of ['HF_HUB_CACHE', 'HUGGINGFACE_HUB_CACHE', 'HF_HOME', 'XDG_CACHE_HOME'] as const)
    delete process.env[k];
  process.env.HOME = vars.HOME ?? path.join(tmp, 'empty-home');
  if (vars.HF_HUB_CACHE) process.env.HF_HUB_CACHE = vars.HF_HUB_CACHE;
  if (vars.HF_HOME) process.env.HF_HOME = vars.HF_HOME;
}

async function check(paths: string[], model?: string): Promise<CheckReport> {
  let out = '';
  await runCheck(paths, { json: true, workers: 0, ...(model ? { model } : {}) }, { write: (s: string) => (out += s) });
  return CheckReport.parse(JSON.parse(out));
}

/**
 * Each trajectory's findings, by id, without their messages (a message may name the profile, which
 * is the folder): what must be the same whichever way the folder was found.
 */
const findings = (r: CheckReport) =>
  r.trajectories
    .map((t) => [t.id, JSON.stringify((t.findings as { message?: string }[]).map(({ message: _m, ...f }) => f))])
    .sort((a, b) => a[0]!.localeCompare(b[0]!));

const run = path.join(tmp, 'run');
let explicit: CheckReport;
let folder: string;

beforeAll(async () => {
  // The values fixtures (planted masks, lengths, values) and a vLLM chat log, their model renamed and ids Qwen3.5's.
  fs.mkdirSync(run, { recursive: true });
  const copy = (rel: string, rename: (t: string) => string) =>
    fs.writeFileSync(
      path.join(run, path.basename(rel)),
      rename(remapJsonText(fs.readFileSync(path.join(FIXTURES, rel), 'utf8'), QWEN35_IDS)),
    );
  copy('values/native/values.rollscope.jsonl', (t) => t.replace(/^\{"id":/gm, `{"model":"${MODEL}","id":`));
  copy('vllm/chat-by-id.jsonl', (t) => t.replaceAll('"Qwen/Qwen2.5-VL-7B-Instruct"', JSON.stringify(MODEL)));
  folder = layOut(path.join(tmp, 'explicit', 'hub'));
  environment({});
  explicit = await check([run], folder);
}, 180_000);

describe(`${MODEL} from the Hugging Face cache`, () => {
  it('with --model FOLDER: checked with the folder, with findings that need its tokenizer', () => {
    expect(new Set(explicit.trajectories.map((t) => t.profile))).toEqual(new Set([folder]));
    expect(explicit.trajectories.length).toBeGreaterThan(10);
    // Mask, sample and prefix findings need the tokenizer and the template: the folder's are in use.
    expect(
      explicit.trajectories.some((t) => (t.findings as { kind: string }[]).some((f) => f.kind === 'mask_mismatch')),
    ).toBe(true);
  });

  const layouts: [string, () => { snapshot: string; vars: Parameters<typeof environment>[0] }][] = [
    [
      'HF_HUB_CACHE',
      () => {
        const hub = path.join(tmp, 'hub-cache');
        return { snapshot: layOut(hub), vars: { HF_HUB_CACHE: hub } };
      },
    ],
    [
      'HF_HOME (its hub folder)',
      () => {
        const home = path.join(tmp, 'hf-home');
        return { snapshot: layOut(path.join(home, 'hub')), vars: { HF_HOME: home } };
      },
    ],
    [
      'the default ~/.cache/huggingface/hub',
      () => {
        const home = path.join(tmp, 'user-home');
        return { snapshot: layOut(path.join(home, '.cache', 'huggingface', 'hub')), vars: { HOME: home } };
      },
    ],
  ];

  it.each(layouts)(
    'under %s: the same findings as with --model FOLDER, without any flag, and the report names the folder',
    async (_name, setUp) => {
      const { snapshot, vars } = setUp();
      environment(vars);
      expect(hubCacheDir()).toBe(path.dirname(path.dirname(path.dirname(snapshot))));
      const found = await check([run]);
      expect(new Set(found.trajectories.map((t) => t.profile))).toEqual(new Set([snapshot]));
      expect(findings(found)).toEqual(findings(explicit));
      expect(found.models).toEqual([
        expect.objectContaining({
          model: MODEL,
          profile: snapshot,
          limitation: null,
          notes: [`${MODEL}: found in the Hugging Face cache, ${snapshot}`],
        }),
      ]);
    },
    120_000,
  );

  it('a cache without refs/main, or without the model, leaves the one-line limitation', async () => {
    const hub = path.join(tmp, 'no-ref');
    layOut(hub);
    fs.rmSync(path.join(hub, 'models--Qwen--Qwen3.5-9B', 'refs'), { recursive: true });
    environment({ HF_HUB_CACHE: hub });
    expect(cachedModelFolder(MODEL)).toEqual({ missing: expect.stringContaining('not in the Hugging Face cache') });
    const r = await check([run]);
    expect(r.models).toEqual([expect.objectContaining({ model: MODEL, limitation: LIMITATION })]);
    environment({ HF_HUB_CACHE: path.join(tmp, 'nothing-here') });
    expect('missing' in cachedModelFolder(MODEL)).toBe(true);
  }, 120_000);

  it('reads the cache variables in huggingface_hub order', () => {
    const home = '/home/u';
    expect(hubCacheDir({ HF_HUB_CACHE: '/a', HF_HOME: '/b' }, home)).toBe('/a');
    expect(hubCacheDir({ HUGGINGFACE_HUB_CACHE: '/legacy', HF_HOME: '/b' }, home)).toBe('/legacy');
    expect(hubCacheDir({ HF_HOME: '/b' }, home)).toBe('/b/hub');
    expect(hubCacheDir({ XDG_CACHE_HOME: '/x' }, home)).toBe('/x/huggingface/hub');
    expect(hubCacheDir({}, home)).toBe('/home/u/.cache/huggingface/hub');
    expect(hubCacheDir({ HF_HOME: '~/hf' }, home)).toBe('/home/u/hf/hub');
    expect(cachedModelFolder('/ckpt/Qwen3.5-9B', {}, home)).toEqual({
      missing: expect.stringContaining('not a Hugging Face repository id'),
    });
  });
});
