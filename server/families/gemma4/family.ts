// The Gemma 4 family (docs/reference/models/gemma4.md): `<|turn>role\n … <turn|>\n` turns, the
// thinking channel stripped from history, `<|image>` + N × `<|image|>` + `<image|>` per image with N
// from the aspect-preserving resize. From a model folder only (no npm package ships its tokenizer).
import { z } from 'zod';
import type { ImageRun, ImageTokens, MediaSpan, ModelFamily, ModelFiles, VisionConfig } from '../family.ts';
import { gemma4FamilyIds, gemma4Named, gemma4Tokens, type Gemma4Ids, isGemma4Tokenizer } from './ids.ts';
import { GEMMA4_TOKENS } from './tokens.ts';
import { aspectRatioPreservingSize, GEMMA4_IMAGE_DEFAULTS, SUPPORTED_SOFT_TOKENS } from './vision.ts';

const GEMMA4_NAME = /gemma-?4(?![0-9])/;

const Processor = z
  .object({
    image_processor: z
      .object({
        patch_size: z.number().int().positive().optional(),
        pooling_kernel_size: z.number().int().positive().optional(),
        max_soft_tokens: z.number().int().positive().optional(),
      })
      .passthrough()
      .optional(),
  })
  .passthrough();
const Config = z
  .object({
    vision_config: z
      .object({
        patch_size: z.number().int().positive().optional(),
        pooling_kernel_size: z.number().int().positive().optional(),
        default_output_length: z.number().int().positive().optional(),
        num_soft_tokens: z.number().int().positive().optional(),
      })
      .passthrough()
      .optional(),
  })
  .passthrough();

function read<T>(schema: z.ZodType<T>, value: unknown, file: string): T | undefined {
  if (value === undefined) return undefined;
  const r = schema.safeParse(value);
  if (!r.success)
    throw new Error(`${file}: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return r.data;
}

function gemma4Processor(files: ModelFiles, _generation: string, notes: string[]): VisionConfig {
  const at = (name: string) => (files.dir ? `${files.dir}/${name}` : name);
  const ip = read(Processor, files.processorConfig, at('processor_config.json'))?.image_processor;
  const vc = read(Config, files.config, at('config.json'))?.vision_config;
  const d = GEMMA4_IMAGE_DEFAULTS;
  const patchSize = ip?.patch_size ?? vc?.patch_size ?? d.patchSize;
  const pool = ip?.pooling_kernel_size ?? vc?.pooling_kernel_size ?? d.poolingKernelSize;
  const maxSoftTokens = ip?.max_soft_tokens ?? vc?.num_soft_tokens ?? vc?.default_output_length ?? d.maxSoftTokens;
  if (!(SUPPORTED_SOFT_TOKENS as readonly number[]).includes(maxSoftTokens))
    throw new Error(
      `${at('processor_config.json')}: max_soft_tokens ${maxSoftTokens} is not one of ${SUPPORTED_SOFT_TOKENS.join(', ')}`,
    );
  if (!ip && files.dir) notes.push(`processor_config.json states no image_processor: max_soft_tokens ${maxSoftTokens}`);
  return {
    patchSize,
    mergeSize: pool,
    temporalPatchSize: 1,
    minPixels: 0,
    maxPixels: maxSoftTokens * pool * pool * patchSize * patchSize,
    extra: { maxSoftTokens },
  };
}

function gemma4ImageTokens(width: number, height: number, vision: VisionConfig): ImageTokens {
  const maxSoftTokens = typeof vision.extra?.maxSoftTokens === 'number' ? vision.extra.maxSoftTokens : 280;
  const r = aspectRatioPreservingSize(height, width, {
    patchSize: vision.patchSize,
    poolingKernelSize: vision.mergeSize,
    maxSoftTokens,
  });
  const cell = vision.patchSize * vision.mergeSize;
  return {
    resizedWidth: r.width,
    resizedHeight: r.height,
    gridThw: [1, r.height / vision.patchSize, r.width / vision.patchSize],
    padCount: r.softTokens,
    cellSize: cell,
    cellsWide: r.width / cell,
    cellsHigh: r.height / cell,
  };
}

/** A placeholder the template wrote: `<|image|>` (or `<|video|>`) not inside a run. */
const isPlaceholder = (ids: readonly number[], i: number, t: Gemma4Ids) =>
  (ids[i] === t.image || ids[i] === t.video) && ids[i - 1] !== t.imageOpen && ids[i - 1] !== ids[i];

function findSpans(tokens: readonly number[], t: Gemma4Ids): MediaSpan[] {
  const spans: MediaSpan[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const headless = i === 0 && (tokens[0] === t.image || tokens[0] === t.video);
    if (tokens[i] !== t.imageOpen && !headless) continue;
    const padStart = headless ? i : i + 1;
    const pad = tokens[padStart];
    const kind = pad === t.video ? 'video' : 'image';
    let j = padStart;
    while (j < tokens.length && tokens[j] === pad && (pad === t.image || pad === t.video)) j++;
    const end = j < tokens.length && tokens[j] === t.imageClose ? j : -1;
    spans.push({ kind, start: headless ? -1 : i, padStart, padLength: j - padStart, end });
    i = end >= 0 ? end : j - 1;
  }
  return spans;
}

function expand(
  ids: readonly number[],
  media: readonly (ImageRun | undefined)[],
  first: number,
  t: Gemma4Ids,
): number[] {
  const out: number[] = [];
  let k = first;
  for (let i = 0; i < ids.length; i++) {
    if (!isPlaceholder(ids, i, t) || ids[i] !== t.image) {
      out.push(ids[i]!);
      continue;
    }
    const item = media[k++];
    if (!item) {
      out.push(ids[i]!);
      continue;
    }
    out.push(t.imageOpen);
    for (let n = 0; n < item.pads; n++) out.push(t.image);
    out.push(t.imageClose);
  }
  return out;
}

export const gemma4: ModelFamily = {
  name: 'gemma4',
  label: 'Gemma 4',
  modelTypes: { gemma4: 'gemma4', gemma4_text: 'gemma4' },
  claimsModelName: (name) => GEMMA4_NAME.test(name),
  builtinFor: () => undefined,
  recognizesTokenizer: isGemma4Tokenizer,
  generationFor: () => 'gemma4',
  builtins: [],
  placeholdersFromAddedTokens(added, where) {
    const id = (content: string): number => {
      const t = added.find((a) => a.content === content);
      if (!t) throw new Error(`${where}: the tokenizer has no ${content} token`);
      return t.id;
    };
    const image = id(GEMMA4_TOKENS.image);
    return {
      imageBegin: id(GEMMA4_TOKENS.imageOpen),
      imageHeader: [],
      imagePad: image,
      pads: [image, id(GEMMA4_TOKENS.video)],
      imageText: {
        begin: GEMMA4_TOKENS.imageOpen,
        header: '',
        pad: GEMMA4_TOKENS.image,
        end: GEMMA4_TOKENS.imageClose,
      },
    };
  },
  ids: (tok, files, where, notes) => gemma4FamilyIds(gemma4Tokens(tok, files, where, notes)),
  processor: gemma4Processor,
  pixelBounds: false,
  imageTokens: gemma4ImageTokens,
  padCountFromGrid(grid, vision) {
    const [t, h, w] = grid;
    return (t * h * w) / (vision.mergeSize * vision.mergeSize);
  },
  expandMedia: (rendered, media, first, ids) => expand(rendered.ids, media.images, first.images, gemma4Named(ids)),
  countPlaceholders(ids, family) {
    const t = gemma4Named(family);
    let images = 0;
    let videos = 0;
    for (let i = 0; i < ids.length; i++)
      if (isPlaceholder(ids, i, t) && ids[i + 1] !== ids[i]) {
        if (ids[i] === t.image) images++;
        else videos++;
      }
    return { images, videos };
  },
  findMediaSpans: (tokens, ids) => findSpans(tokens, gemma4Named(ids)),
  trainerFields: { grids: false, positionIds: 'plain', mmTokenTypeIds: true, tokenTypeIds: false },
  positionIds: (tokens) => ({ rows: [tokens.map((_, i) => i)], delta: 0 }),
  toolCalls: { name: 'none', open: '', close: '', parse: (text) => ({ content: text, calls: [] }) },
  labels: {
    bos: 'begin of sequence',
    endOfText: 'end of text',
    turnOpen: 'turn start',
    turnClose: 'end of turn',
    channelOpen: 'thought channel start',
    channelClose: 'thought channel end',
    imageOpen: 'image start',
    image: 'image soft token',
    imageClose: 'image end',
    video: 'video soft token',
  },
  explain(cause, token) {
    return cause === 'reasoning_stripped' && token === GEMMA4_TOKENS.channelOpen
      ? `the generation prompt pre-filled an empty thought channel (${token}thought, ${GEMMA4_TOKENS.channelClose}) that the template does not write when it renders the turn as history`
      : undefined;
  },
};
