// Which profile a trajectory gets: `--model` may name a local folder; a model the data names is
// always a built-in profile, even when the working directory has a folder of that name.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BUILTIN_PROFILES, loadProfile, profileFor, visionIdsFor, visionIdsOf } from '../server/profiles/profile.ts';

const cwd = process.cwd();
afterEach(() => process.chdir(cwd));

describe('profile resolution', () => {
  it('gives a data-named model its built-in profile, not a same-named folder in the working directory', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-profile-'));
    // An empty folder named like the built-in: loading it as a model folder fails (no tokenizer.json).
    fs.mkdirSync(path.join(dir, 'qwen2.5-vl'));
    process.chdir(dir);
    try {
      const p = profileFor(undefined, 'Qwen/Qwen2.5-VL-7B-Instruct');
      expect(p.name).toBe('qwen2.5-vl');
      expect(profileFor(undefined, undefined).name).toBe('qwen2.5-vl');
      // Named on the command line, the folder is what the user means, and its problem is reported.
      expect(() => loadProfile('./qwen2.5-vl')).toThrow(/no tokenizer\.json in the model folder/);
    } finally {
      process.chdir(cwd);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('resolves a spec once and hands back the same profile', () => {
    expect(loadProfile('qwen3-vl')).toBe(loadProfile('Qwen/Qwen3-VL-8B-Instruct'));
    expect(profileFor('qwen3-vl', 'Qwen/Qwen2-VL-7B')).toBe(loadProfile('qwen3-vl'));
  });

  it("gives importers each profile's own placeholder ids without building its tokenizer, none for a model no profile covers", () => {
    for (const name of BUILTIN_PROFILES) {
      const ids = visionIdsOf(loadProfile(name));
      expect(visionIdsFor(name, undefined), name).toEqual(ids);
      expect(visionIdsFor(undefined, loadProfile(name).name), name).toEqual(ids);
    }
    expect(visionIdsFor(undefined, undefined)).toEqual(visionIdsOf(loadProfile('qwen2.5-vl')));
    expect(visionIdsFor(undefined, 'Qwen/Qwen3.5-9B')).toBeUndefined();
  });
});
