// The Kimi family (docs/reference/models/kimi.md): Kimi K2.5 and Kimi-VL. One opener per role
// (`<|im_assistant|>assistant<|im_middle|>`), `<|im_end|>` with no newline after it, media items
// `<|media_begin|>image<|media_content|>` + pads + `<|media_end|>` in two token spaces (one pad, or
// the image's N from navit_resize_image), a tiktoken vocabulary. From a model folder only.
import path from 'node:path';
import { z } from 'zod';
import type { TokenizerHandle } from '../../profiles/tokenizer.ts';
import type {
  FamilyIds,
  ImageTokens,
  MediaSpan,
  ModelFamily,
  ModelFiles,
  ParsedToolCalls,
  TurnHeader,
  VisionConfig,
} from '../family.ts';
import { KIMI_PATTERN_PYTHON, KIMI_TOKENS } from './tokens.ts';
import { KIMI_K25_MEDIA_DEFAULTS, navitResizeImage } from './vision.ts';

export interface KimiIds {
  bos: number;
  endOfText: number;
  imEnd: number;
  imUser: number;
  imAssistant: number;
  imSystem: number;
  imMiddle: number;
  eos: number;
  mediaBegin: number;
  mediaContent: number;
  mediaEnd: number;
  mediaPad: number;
}

const KIMI_NAME = /kimi-(k2\.5|k25|vl)/;

function kimiTokens(tok: TokenizerHandle, files: ModelFiles, where: string): KimiIds & { header: number[] } {
  const id = (text: string): number => {
    const v = tok.tokenOfText(text);
    if (v === undefined) throw new Error(`${where}: the tokenizer has no ${text} token; not a Kimi tokenizer`);
    return v;
  };
  const stated = files.config?.media_placeholder_token_id;
  const mediaPad = typeof stated === 'number' ? stated : id(KIMI_TOKENS.mediaPad);
  const imEnd = id(KIMI_TOKENS.imEnd);
  return {
    bos: id(KIMI_TOKENS.bos),
    endOfText: id(KIMI_TOKENS.eos),
    imEnd,
    imUser: id(KIMI_TOKENS.imUser),
    imAssistant: id(KIMI_TOKENS.imAssistant),
    imSystem: id(KIMI_TOKENS.imSystem),
    imMiddle: id(KIMI_TOKENS.imMiddle),
    eos: imEnd,
    mediaBegin: tok.tokenOfText(KIMI_TOKENS.mediaBegin) ?? id(KIMI_TOKENS.mediaStart),
    mediaContent: id(KIMI_TOKENS.mediaContent),
    mediaEnd: id(KIMI_TOKENS.mediaEnd),
    mediaPad,
    header: [],
  };
}

function header(t: KimiIds) {
  return (tokens: readonly number[], at: number): TurnHeader | undefined => {
    const id = tokens[at];
    if (id !== t.imUser && id !== t.imAssistant && id !== t.imSystem) return undefined;
    let j = at + 1;
    while (j < tokens.length && tokens[j] !== t.imMiddle && j - at < 8) j++;
    return {
      role: id === t.imAssistant ? 'assistant' : 'other',
      roleSpan: [at + 1, Math.min(j, tokens.length)],
      end: Math.min(j + 1, tokens.length),
    };
  };
}

const kimiNamed = (ids: FamilyIds): KimiIds => ids.named as unknown as KimiIds;

const MediaProc = z
  .object({
    patch_size: z.number().int().positive().optional(),
    merge_kernel_size: z.union([z.number().int().positive(), z.array(z.number().int().positive())]).optional(),
    in_patch_limit: z.number().int().positive().optional(),
    patch_limit_on_one_side: z.number().int().positive().optional(),
    fixed_output_tokens: z.number().int().positive().nullable().optional(),
  })
  .passthrough();

function kimiProcessor(files: ModelFiles, _generation: string, notes: string[]): VisionConfig {
  const raw = (files.preprocessorConfig?.media_proc_cfg ?? files.processorConfig?.media_proc_cfg) as unknown;
  let cfg: z.infer<typeof MediaProc> = {};
  if (raw !== undefined) {
    const r = MediaProc.safeParse(raw);
    const file = files.dir ? path.join(files.dir, 'preprocessor_config.json') : 'preprocessor_config.json';
    if (!r.success)
      throw new Error(
        `${file}: media_proc_cfg: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
      );
    cfg = r.data;
  } else if (files.dir) notes.push("no media_proc_cfg in preprocessor_config.json: Kimi K2.5's released settings");
  const d = KIMI_K25_MEDIA_DEFAULTS;
  const merge = Array.isArray(cfg.merge_kernel_size)
    ? cfg.merge_kernel_size[0]!
    : (cfg.merge_kernel_size ?? d.mergeKernelSize);
  const patch = cfg.patch_size ?? d.patchSize;
  const inPatchLimit = cfg.in_patch_limit ?? d.inPatchLimit;
  return {
    patchSize: patch,
    mergeSize: merge,
    temporalPatchSize: 1,
    minPixels: 0,
    maxPixels: inPatchLimit * patch * patch,
    extra: {
      inPatchLimit,
      patchLimitOnOneSide: cfg.patch_limit_on_one_side ?? d.patchLimitOnOneSide,
      ...(cfg.fixed_output_tokens ? { fixedOutputTokens: cfg.fixed_output_tokens } : {}),
    },
  };
}

function kimiImageTokens(width: number, height: number, v: VisionConfig): ImageTokens {
  const e = v.extra ?? {};
  const r = navitResizeImage(width, height, {
    patchSize: v.patchSize,
    mergeKernelSize: v.mergeSize,
    inPatchLimit: typeof e.inPatchLimit === 'number' ? e.inPatchLimit : KIMI_K25_MEDIA_DEFAULTS.inPatchLimit,
    patchLimitOnOneSide:
      typeof e.patchLimitOnOneSide === 'number' ? e.patchLimitOnOneSide : KIMI_K25_MEDIA_DEFAULTS.patchLimitOnOneSide,
    fixedOutputTokens: typeof e.fixedOutputTokens === 'number' ? e.fixedOutputTokens : null,
  });
  const cell = v.patchSize * v.mergeSize;
  const w = r.newWidth + r.padWidth;
  const h = r.newHeight + r.padHeight;
  return {
    resizedWidth: w,
    resizedHeight: h,
    gridThw: [1, h / v.patchSize, w / v.patchSize],
    padCount: r.numTokens,
    cellSize: cell,
    cellsWide: w / cell,
    cellsHigh: h / cell,
  };
}

/** Where a media item's pads start: after `<|media_begin|>` and its header (`image<|media_content|>`). */
function padStartAfter(tokens: readonly number[], begin: number, t: KimiIds): number {
  let j = begin + 1;
  while (j < tokens.length && j - begin < 6 && tokens[j] !== t.mediaContent && tokens[j] !== t.mediaPad) j++;
  return tokens[j] === t.mediaContent ? j + 1 : j;
}

function findSpans(tokens: readonly number[], t: KimiIds): MediaSpan[] {
  const spans: MediaSpan[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const headless = i === 0 && tokens[0] === t.mediaPad;
    if (tokens[i] !== t.mediaBegin && !headless) continue;
    const padStart = headless ? 0 : padStartAfter(tokens, i, t);
    let j = padStart;
    while (j < tokens.length && tokens[j] === t.mediaPad) j++;
    const end = j < tokens.length && tokens[j] === t.mediaEnd ? j : -1;
    spans.push({ kind: 'image', start: headless ? -1 : i, padStart, padLength: j - padStart, end });
    i = end >= 0 ? end : j - 1;
  }
  return spans;
}

/**
 * vLLM's `kimi_k2` tool parser: calls sit between `<|tool_calls_section_begin|>` and
 * `<|tool_calls_section_end|>`, each `<|tool_call_begin|>functions.NAME:N<|tool_call_argument_begin|>ARGS<|tool_call_end|>`;
 * the content is the text before the section (null when empty).
 */
const CALL = /<\|tool_call_begin\|>\s*([^<]+?)\s*<\|tool_call_argument_begin\|>\s*([\s\S]*?)\s*<\|tool_call_end\|>/g;
function parseKimiToolCalls(text: string): ParsedToolCalls {
  const at = text.indexOf(KIMI_TOKENS.toolCallsSectionBegin);
  if (at < 0) return { content: text, calls: [] };
  const calls = [...text.slice(at).matchAll(CALL)].map((m) => ({
    name: m[1]!.split(':')[0]!.split('.').at(-1)!,
    arguments: m[2]!,
  }));
  const content = text.slice(0, at);
  return { content: content === '' ? null : content, calls };
}

export const kimi: ModelFamily = {
  name: 'kimi',
  label: 'Kimi',
  modelTypes: { kimi_k25: 'kimi-k2.5', kimi_vl: 'kimi-vl' },
  claimsModelName: (name) => KIMI_NAME.test(name),
  builtinFor: () => undefined,
  recognizesTokenizer: (tok) =>
    tok.tokenOfText(KIMI_TOKENS.imMiddle) !== undefined && tok.tokenOfText(KIMI_TOKENS.mediaPad) !== undefined,
  generationFor(files) {
    const modelType = typeof files.config?.model_type === 'string' ? files.config.model_type : undefined;
    return (modelType !== undefined ? this.modelTypes[modelType] : undefined) ?? 'kimi-k2.5';
  },
  builtins: [],
  tiktoken: {
    pattern: KIMI_PATTERN_PYTHON,
    // tokenization_kimi.py: the 256 ids after the ranks are tokenizer_config.json's added tokens,
    // the ones it does not name `<|reserved_token_N|>`.
    specialTokens(files, base, where) {
      const decoder = (files.tokenizerConfig?.added_tokens_decoder ?? {}) as Record<string, { content?: unknown }>;
      return Array.from({ length: 256 }, (_, k) => {
        const id = base + k;
        const content = decoder[String(id)]?.content;
        if (content !== undefined && typeof content !== 'string')
          throw new Error(`${where}: tokenizer_config.json added_tokens_decoder.${id}.content is not a string`);
        return { id, content: content ?? `<|reserved_token_${id}|>` };
      });
    },
  },
  placeholdersFromAddedTokens(added, where) {
    const id = (content: string): number => {
      const t = added.find((a) => a.content === content);
      if (!t) throw new Error(`${where}: the tokenizer has no ${content} token`);
      return t.id;
    };
    const pad = id(KIMI_TOKENS.mediaPad);
    const t = KIMI_TOKENS;
    return {
      imageBegin: id(t.mediaBegin),
      imageHeader: [],
      imagePad: pad,
      pads: [pad],
      imageText: { begin: t.mediaBegin, header: `image${t.mediaContent}`, pad: t.mediaPad, end: t.mediaEnd },
    };
  },
  ids(tok, files, where) {
    const t = kimiTokens(tok, files, where);
    const image = tok.tokenOfText('image');
    if (image === undefined) throw new Error(`${where}: the tokenizer has no "image" token`);
    return {
      eos: t.eos,
      grammar: {
        openers: [t.imUser, t.imAssistant, t.imSystem],
        header: header(t),
        endOfTurn: t.imEnd,
        afterEnd: [],
        stops: [t.imEnd, t.endOfText],
        secondaryStops: [],
        stopOpensTurn: false,
      },
      media: {
        image: { begin: t.mediaBegin, header: [image, t.mediaContent], pad: t.mediaPad, end: t.mediaEnd },
        collapsible: true,
      },
      named: {
        bos: t.bos,
        endOfText: t.endOfText,
        imEnd: t.imEnd,
        imUser: t.imUser,
        imAssistant: t.imAssistant,
        imSystem: t.imSystem,
        imMiddle: t.imMiddle,
        eos: t.eos,
        mediaBegin: t.mediaBegin,
        mediaContent: t.mediaContent,
        mediaEnd: t.mediaEnd,
        mediaPad: t.mediaPad,
      },
    };
  },
  processor: kimiProcessor,
  pixelBounds: false,
  imageTokens: kimiImageTokens,
  padCountFromGrid(grid, v) {
    const [t, h, w] = grid;
    return (t * h * w) / (v.mergeSize * v.mergeSize);
  },
  expandMedia(rendered, media, first, ids) {
    const t = kimiNamed(ids);
    const out: number[] = [];
    let k = first.images;
    const src = rendered.ids;
    for (let i = 0; i < src.length; i++) {
      const placeholder = src[i] === t.mediaPad && src[i - 1] === t.mediaContent && src[i + 1] === t.mediaEnd;
      if (!placeholder) {
        out.push(src[i]!);
        continue;
      }
      const n = media.images[k++]?.pads ?? 1;
      for (let c = 0; c < n; c++) out.push(t.mediaPad);
    }
    return out;
  },
  countPlaceholders(ids, family) {
    const t = kimiNamed(family);
    let images = 0;
    for (let i = 1; i + 1 < ids.length; i++)
      if (ids[i] === t.mediaPad && ids[i - 1] === t.mediaContent && ids[i + 1] === t.mediaEnd) images++;
    return { images, videos: 0 };
  },
  findMediaSpans: (tokens, ids) => findSpans(tokens, kimiNamed(ids)),
  trainerFields: { grids: true, positionIds: 'plain', mmTokenTypeIds: false, tokenTypeIds: false },
  positionIds: (tokens) => ({ rows: [tokens.map((_, i) => i)], delta: 0 }),
  toolCalls: {
    name: 'kimi_k2',
    open: KIMI_TOKENS.toolCallsSectionBegin,
    close: KIMI_TOKENS.toolCallsSectionEnd,
    parse: parseKimiToolCalls,
  },
  labels: {
    bos: 'begin of sequence',
    endOfText: 'end of text',
    imEnd: 'end of turn',
    imUser: 'user turn',
    imAssistant: 'assistant turn',
    imSystem: 'system turn',
    imMiddle: 'role end',
    mediaBegin: 'media start',
    mediaContent: 'media content',
    mediaEnd: 'media end',
    mediaPad: 'media pad',
  },
};
