// A model whose ids differ is checked with its own ids: for each profile the fixtures use, a model
// folder is built from that profile's tokenizer with every special and vision token (and the
// newline and role words) moved to other ids (test/support/moved-ids.ts), the fixtures of every
// format are re-encoded to those ids, and the run checked with `--model FOLDER` must give the
// same findings (kind, cause, severity, turn, index, stream, field, image) as the original run
// with the built-in profile. verl-dump and areal-dump hold text, not ids: nothing to move.
// A folder that lacks a file says which.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CheckedTrajectory } from '../server/analysis/checked.ts';
import { runCheck } from '../server/cli/check.ts';
import { CheckReport } from '../server/report/check-report.ts';
import { checkPaths } from '../server/pipeline.ts';
import { builtinNamed } from '../server/families/index.ts';
import { loadProfile } from '../server/profiles/profile.ts';
import { movedIds, writeMovedFixtures, writeMovedFolder } from './support/moved-ids.ts';
import { qwenNamed, type QwenTokens } from '../server/families/qwen/ids.ts';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
const FORMATS_WITH_IDS = [
  'native',
  'vllm',
  'slime',
  'slime-train',
  'verl',
  'areal',
  'prime-rl',
  'agent-lightning',
  'sglang',
  'sglang-openai',
] as const;

interface Checked {
  key: string;
  format: string;
  profile: string;
  findings: string[];
}

/** What must not change when only the ids do: where each finding is and what it is. */
const placeOf = (f: CheckedTrajectory['findings'][number]) =>
  JSON.stringify([
    f.kind,
    f.cause ?? null,
    f.severity,
    f.turn,
    f.index,
    f.stream ?? null,
    f.field ?? null,
    f.image ?? null,
  ]);

async function run(root: string, model?: string): Promise<Map<string, Checked>> {
  const out = new Map<string, Checked>();
  for await (const ev of checkPaths([root], { workers: 0, ...(model ? { model } : {}) })) {
    if (ev.type !== 'trajectory') continue;
    const t = ev.checked.trajectory;
    const key = `${path.relative(root, t.source.file)}:${t.source.line}#${t.id}`;
    out.set(key, {
      key,
      format: t.source.format,
      profile: ev.checked.profile.name,
      findings: ev.checked.findings.map(placeOf),
    });
  }
  return out;
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-moved-ids-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

let original: Map<string, Checked>;
/** Per profile used by the original run: the trajectories it checked and the moved run's answer for each. */
const compared: { profile: string; original: Checked; moved: Checked | undefined }[] = [];

beforeAll(async () => {
  original = await run(FIXTURES);
  // The moved folder is built the Qwen way (test/support/moved-ids.ts): Qwen's profiles only.
  const used = [...new Set([...original.values()].map((c) => c.profile))].filter(
    (name) => builtinNamed(name)?.family.name === 'qwen',
  );
  for (const name of used) {
    const profile = loadProfile(name);
    const perm = movedIds(profile);
    const root = path.join(tmp, name, 'fixtures');
    const folder = path.join(tmp, name, 'model');
    writeMovedFixtures(root, perm);
    writeMovedFolder(folder, profile, perm, { template: name === 'qwen3-vl' ? 'jinja' : 'tokenizer_config' });
    const moved = await run(root, folder);
    for (const c of original.values())
      if (c.profile === name) compared.push({ profile: name, original: c, moved: moved.get(c.key) });
  }
}, 600_000);

describe('the same run re-encoded to moved ids, checked with the moved folder', () => {
  it('the folder really moves the ids', () => {
    const profile = loadProfile('qwen2.5-vl');
    const folder = loadProfile(path.join(tmp, 'qwen2.5-vl', 'model'));
    for (const k of Object.keys(qwenNamed(profile.ids)) as (keyof QwenTokens)[])
      expect(qwenNamed(folder.ids)[k], k).not.toBe(qwenNamed(profile.ids)[k]);
    expect(folder.tokenizer.vocabSize).toBe(profile.tokenizer.vocabSize);
    expect(folder.notes).toEqual([]);
  });

  it.each(FORMATS_WITH_IDS)('%s: the same findings at the same places', (format) => {
    const mine = compared.filter((c) => c.original.format === format);
    expect(mine.length, `${format} fixtures checked`).toBeGreaterThan(0);
    // Some findings in the format, so the comparison can fail.
    expect(
      mine.some((c) => c.original.findings.length > 0),
      `${format} fixtures have findings`,
    ).toBe(true);
    const differ = mine
      .filter((c) => JSON.stringify(c.moved?.findings) !== JSON.stringify(c.original.findings))
      .map((c) => ({
        profile: c.profile,
        key: c.original.key,
        original: c.original.findings,
        moved: c.moved?.findings,
      }));
    expect(differ).toEqual([]);
  });
});

describe('a model folder that lacks a file', () => {
  const profile = () => loadProfile('qwen2.5-vl');
  const folder = (name: string, omit: string[]) => {
    const dir = path.join(tmp, 'lacking', name);
    writeMovedFolder(dir, profile(), movedIds(profile()), { omit });
    return dir;
  };

  it('tokenizer.json: refused, naming it', () => {
    expect(() => loadProfile(folder('no-tokenizer', ['tokenizer.json']))).toThrow(
      /no tokenizer\.json in the model folder/,
    );
  });

  it('any chat template: refused, naming the three places it looked', () => {
    const dir = folder('no-template', []);
    const config = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'));
    delete config.chat_template;
    fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(config));
    expect(() => loadProfile(dir)).toThrow(
      /no chat template found \(chat_template\.jinja, chat_template\.json or tokenizer_config\.json/,
    );
  });

  it.each([
    ['config.json', /config\.json absent: the vision token ids are those tokenizer\.json gives their text/],
    ['preprocessor_config.json', /preprocessor_config\.json absent: image processor of qwen2\.5-vl \(patch 14/],
  ])('%s: loads with the ids and settings it still knows, and says what it defaulted', (file, note) => {
    const p = loadProfile(folder(`no-${file}`, [file]));
    expect(
      p.notes.some((n) => note.test(n)),
      p.notes.join('\n'),
    ).toBe(true);
    const moved = loadProfile(path.join(tmp, 'qwen2.5-vl', 'model'));
    expect(qwenNamed(p.ids)).toEqual(qwenNamed(moved.ids));
    expect(p.vision).toEqual(moved.vision);
  });

  it("says what it defaulted once in check's output and in --json models", async () => {
    const dir = folder('notes-in-check', ['config.json']);
    const file = path.join(tmp, 'qwen2.5-vl', 'fixtures', 'vllm', 'chat-by-id.jsonl');
    let text = '';
    let json = '';
    await runCheck([file], { json: false, workers: 0, model: dir }, { write: (s: string) => (text += s) });
    await runCheck([file], { json: true, workers: 0, model: dir }, { write: (s: string) => (json += s) });
    expect(text.split('config.json absent').length - 1).toBe(1);
    expect(CheckReport.parse(JSON.parse(json)).models.flatMap((m) => m.notes)).toEqual([
      'config.json absent: the vision token ids are those tokenizer.json gives their text',
    ]);
  });
});
