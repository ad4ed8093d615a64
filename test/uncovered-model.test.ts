// A model the data names that no built-in profile covers is never checked as another: records of
// `Qwen/Qwen3.5-9B` (its `<|im_end|>` is 248046) load with one limitation per model, in check's
// text, its --json `models` and serve's run info; tokens are shown as ids; only the checks that
// need no tokenizer run, and still find what they find; export rejects the trajectories as
// `no_profile`; `--model FOLDER` is what covers the model.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FindingKind } from '../server/model/finding.ts';
import { runCheck } from '../server/cli/check.ts';
import { CheckReport } from '../server/report/check-report.ts';
import { openRunStore } from '../server/http/store.ts';
import { pieces } from '../server/http/views.ts';
import { exportRun } from '../server/pipeline/export-run.ts';
import { loadProfile, profileFor } from '../server/profiles/profile.ts';
import { remapJsonText, writeMovedFolder } from './support/moved-ids.ts';
import { buildTrajectory } from './support/build.ts';
import { qwenNamed } from '../server/families/qwen/ids.ts';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
const MODEL = 'Qwen/Qwen3.5-9B';
const LIMITATION = 'Qwen/Qwen3.5-9B: no built-in profile; pass --model FOLDER';

/** Qwen3.5's ids for the tokens the fixtures hold: its added tokens start at 248044 (transformers' config defaults). */
const QWEN35_IDS = new Map(Array.from({ length: 26 }, (_, k) => [151643 + k, 248044 + k] as const));

/** Kinds a check can give without the model's tokenizer, template or ids. */
const WITHOUT_TOKENIZER: ReadonlySet<FindingKind> = new Set<FindingKind>([
  'invalid_value',
  'length_mismatch',
  'logprob_mismatch',
  'logprob_shift',
  'prompt_tokens_mismatch',
  'grouping_ambiguous',
]);

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-uncovered-'));
// A Hugging Face cache of this machine that holds the model would cover it (test/hf-cache.test.ts): an empty one.
process.env.HF_HUB_CACHE = path.join(tmp, 'empty-hub-cache');
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** A fixture with its model renamed and its special ids Qwen3.5's. */
function asQwen35(rel: string, rename: (text: string) => string): string {
  const out = path.join(tmp, 'run', path.basename(rel));
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, rename(remapJsonText(fs.readFileSync(path.join(FIXTURES, rel), 'utf8'), QWEN35_IDS)));
  return out;
}

const run = path.join(tmp, 'run');
let json: CheckReport;
let text = '';
let original: CheckReport;

async function check(paths: string[], opts: { json: boolean }): Promise<string> {
  let out = '';
  await runCheck(paths, { ...opts, workers: 0 }, { write: (s: string) => (out += s) });
  return out;
}

beforeAll(async () => {
  asQwen35('values/native/values.rollscope.jsonl', (t) => t.replace(/^\{"id":/gm, `{"model":"${MODEL}","id":`));
  asQwen35('vllm/chat-by-id.jsonl', (t) => t.replaceAll('"Qwen/Qwen2.5-VL-7B-Instruct"', JSON.stringify(MODEL)));
  json = CheckReport.parse(JSON.parse(await check([run], { json: true })));
  text = await check([run], { json: false });
  original = CheckReport.parse(
    JSON.parse(
      await check(
        [path.join(FIXTURES, 'values/native/values.rollscope.jsonl'), path.join(FIXTURES, 'vllm/chat-by-id.jsonl')],
        { json: true },
      ),
    ),
  );
}, 120_000);

describe(`records that name ${MODEL}`, () => {
  it('are checked with no built-in profile: the stand-in of that model', () => {
    expect(json.trajectories.length).toBeGreaterThan(10);
    expect(new Set(json.trajectories.map((t) => t.profile))).toEqual(new Set([`none:${MODEL}`]));
  });

  it('get one limitation for the model, in --json and once in the text output', () => {
    expect(json.models).toEqual([
      {
        model: MODEL,
        profile: `none:${MODEL}`,
        trajectories: json.trajectories.length,
        limitation: LIMITATION,
        notes: [],
      },
    ]);
    expect(text.split(LIMITATION).length - 1).toBe(1);
    // Not one note per trajectory either.
    expect(json.trajectories.every((t) => !t.limitations.some((l) => l.includes('no built-in profile')))).toBe(true);
  });

  it('give no finding that depends on the tokenizer, and no id is outside a vocabulary nobody knows', () => {
    const findings = json.trajectories.flatMap((t) => t.findings as { kind: FindingKind; message: string }[]);
    expect(findings.filter((f) => !WITHOUT_TOKENIZER.has(f.kind))).toEqual([]);
    expect(findings.filter((f) => /outside the vocabulary/.test(f.message))).toEqual([]);
  });

  it('still get the findings that need no tokenizer, where the built-in profile found them', () => {
    const place = (t: CheckReport['trajectories'][number]) =>
      (t.findings as { kind: FindingKind; index: number; field?: string; message: string }[])
        .filter((f) => WITHOUT_TOKENIZER.has(f.kind) && !/outside the vocabulary/.test(f.message))
        .map((f) => [t.id, f.kind, f.index, f.field ?? null]);
    const found = json.trajectories.flatMap(place);
    expect(found).toEqual(original.trajectories.flatMap(place));
    // The planted NaN, null and zero-filled logprobs, the -100 id, the mask value 2 and the short arrays.
    expect(found.length).toBeGreaterThanOrEqual(7);
  });

  it('show their tokens as ids', () => {
    const p = profileFor(undefined, MODEL);
    expect(pieces(p, [248046, 198])).toEqual({ pieces: { 248046: '#248046', 198: '#198' }, specialIds: [], joins: [] });
  });

  it('are listed with the limitation in serve', async () => {
    const store = openRunStore([run], { pollMs: 0 });
    await store.ready;
    try {
      expect(store.info().models).toEqual([
        expect.objectContaining({ profile: `none:${MODEL}`, names: [MODEL], limitation: LIMITATION, notes: [] }),
      ]);
    } finally {
      await store.close();
    }
  });

  it('are not exported: no profile to build a row with', async () => {
    const r = await exportRun([run], { out: path.join(tmp, 'out.jsonl'), workers: 0 });
    expect(r.manifest.counts.exported).toBe(0);
    expect(r.manifest.counts.byReason.no_profile).toBe(json.trajectories.length);
  });
});

describe(`${MODEL} from a local model folder (--model FOLDER)`, () => {
  // Qwen3.5's ids as transformers' Qwen3_5Config states them, on a tokenizer with its added tokens
  // from 248044 on (the ids between the ordinary vocabulary and them belong to no token here).
  const base = loadProfile('qwen3-vl');
  const folder = path.join(tmp, 'Qwen3.5-9B');
  writeMovedFolder(folder, base, QWEN35_IDS, { template: 'jinja', modelType: 'qwen3_5' });

  it('reads every id, the processor and the template from the folder', () => {
    const p = loadProfile(folder);
    expect(qwenNamed(p.ids)).toMatchObject({
      imEnd: 248046,
      eos: 248046,
      visionStart: 248053,
      visionEnd: 248054,
      imagePad: 248056,
      videoPad: 248057,
    });
    expect(p.family).toBe('qwen3_5');
    expect(p.vision).toEqual(base.vision);
    expect(p.templateSource).toBe(base.templateSource);
    expect(p.notes).toEqual([]);
  });

  it('checks a run of that model clean with its own ids, and names no limitation', async () => {
    const p = loadProfile(folder);
    const t = await buildTrajectory(
      p,
      {
        id: 'qwen35-clean',
        messages: [
          {
            role: 'user',
            content: [
              { type: 'image', image: 'diagram.png' },
              { type: 'text', text: 'AB = 3 and BC = 4. Find AC.' },
            ],
          },
        ],
        images: [{ width: 640, height: 480 }],
        turns: [{ answer: 'AC = 5.', observation: [{ role: 'user', content: 'Why?' }] }, { answer: 'Pythagoras.' }],
      },
      'canonical',
    );
    expect(t.turns[0]!.promptIds).toContain(248056);
    const file = path.join(tmp, 'qwen35', 'run.rollscope.jsonl');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, `${JSON.stringify({ ...t, model: MODEL })}\n`);
    let out = '';
    await runCheck([file], { json: true, workers: 0, model: folder }, { write: (s: string) => (out += s) });
    const r = CheckReport.parse(JSON.parse(out));
    expect(r.trajectories.map((x) => [x.id, x.profile, x.findings])).toEqual([
      ['qwen35-clean', path.resolve(folder), []],
    ]);
    expect(r.models).toEqual([
      { model: MODEL, profile: path.resolve(folder), trajectories: 1, limitation: null, notes: [] },
    ]);
  });
});
