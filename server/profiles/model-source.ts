// Where a model's files come from when no built-in covers it and no `--model FOLDER` is given: the
// Hugging Face cache, read offline as transformers reads it with `local_files_only=True`
// (docs/reference/models/README.md#where-a-model-comes-from). Nothing is downloaded.
//
// The cache folder (huggingface/huggingface_hub src/huggingface_hub/constants.py): `HF_HUB_CACHE`,
// else the legacy `HUGGINGFACE_HUB_CACHE`, else `HF_HOME/hub`, with `HF_HOME` defaulting to
// `$XDG_CACHE_HOME/huggingface`, else `~/.cache/huggingface`. A model `ORG/NAME` lives in
// `models--ORG--NAME/`; `refs/main` holds the commit the default revision points at, and
// `snapshots/<commit>/` the files (huggingface_hub `file_download.py`).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** The Hugging Face hub cache folder for an environment (`env`, `home` for the tests). */
export function hubCacheDir(env: NodeJS.ProcessEnv = process.env, home: string = os.homedir()): string {
  const expand = (p: string) => (p === '~' || p.startsWith('~/') ? path.join(home, p.slice(1)) : p);
  if (env.HF_HUB_CACHE) return expand(env.HF_HUB_CACHE);
  if (env.HUGGINGFACE_HUB_CACHE) return expand(env.HUGGINGFACE_HUB_CACHE);
  const hfHome = env.HF_HOME
    ? expand(env.HF_HOME)
    : path.join(env.XDG_CACHE_HOME ? expand(env.XDG_CACHE_HOME) : path.join(home, '.cache'), 'huggingface');
  return path.join(hfHome, 'hub');
}

/** Whether a model name is a hub repository id (`ORG/NAME`), the only names the cache holds. */
export function isRepoId(name: string): boolean {
  return /^[\w.-]+\/[\w.-]+$/.test(name) && !name.includes('..');
}

/** The files a folder needs to be a model rollscope can load (a tokenizer). */
const TOKENIZER_FILES = ['tokenizer.json', 'tiktoken.model'];

export type CachedModel = { folder: string } | { missing: string };

/**
 * The snapshot folder of `repoId` in the cache, through `refs/main`; or why there is none (said in
 * the run's limitation for the model).
 */
export function cachedModelFolder(
  repoId: string,
  env: NodeJS.ProcessEnv = process.env,
  home: string = os.homedir(),
): CachedModel {
  if (!isRepoId(repoId)) return { missing: `${repoId} is not a Hugging Face repository id (ORG/NAME)` };
  const cache = hubCacheDir(env, home);
  const repo = path.join(cache, `models--${repoId.replace('/', '--')}`);
  const ref = path.join(repo, 'refs', 'main');
  let commit: string;
  try {
    commit = fs.readFileSync(ref, 'utf8').trim();
  } catch {
    return { missing: `not in the Hugging Face cache (${repo})` };
  }
  if (!/^[0-9a-f]{40}$/.test(commit)) return { missing: `${ref} does not hold a commit hash` };
  const folder = path.join(repo, 'snapshots', commit);
  if (!TOKENIZER_FILES.some((f) => fs.existsSync(path.join(folder, f))))
    return { missing: `${folder} holds neither ${TOKENIZER_FILES.join(' nor ')}` };
  return { folder };
}
