// The GLM-4.xV family (docs/reference/models/glm.md): role tokens that open a turn and end the one
// before (no end-of-turn token), `<|begin_of_image|>` + N × `<|image|>` + `<|end_of_image|>` with N
// from smart_resize counting a still image as two frames, mRoPE positions as Qwen2-VL's for images.
// From a model folder only.
import { z } from 'zod';
import type { ImageTokens, MediaSpan, ModelFamily, ModelFiles, VisionConfig } from '../family.ts';
import { mropePositionIds } from '../qwen/mrope.ts';
import { glmFamilyIds, glmNamed, glmTokens, type GlmIds, isGlmTokenizer } from './ids.ts';
import { GLM_TOKENS } from './tokens.ts';
import { glm45ToolCalls } from './tool-calls.ts';
import { GLM4V_MODEL_DEFAULTS, glmImageTokens } from './vision.ts';

const GLM_V_NAME = /glm-?4(\.[156])?v|glm-4\.[156]v/;

const Preprocessor = z
  .object({
    size: z
      .object({ shortest_edge: z.number().int().positive(), longest_edge: z.number().int().positive() })
      .partial()
      .optional(),
    patch_size: z.number().int().positive().optional(),
    merge_size: z.number().int().positive().optional(),
    temporal_patch_size: z.number().int().positive().optional(),
  })
  .passthrough();

function glmProcessor(files: ModelFiles, _generation: string, notes: string[]): VisionConfig {
  const file = files.dir ? `${files.dir}/preprocessor_config.json` : 'preprocessor_config.json';
  let pre: z.infer<typeof Preprocessor> | undefined;
  if (files.preprocessorConfig !== undefined) {
    const r = Preprocessor.safeParse(files.preprocessorConfig);
    if (!r.success)
      throw new Error(`${file}: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
    pre = r.data;
  } else if (files.dir)
    notes.push('preprocessor_config.json absent: the GLM-4.xV checkpoints’ defaults (12544 … 9633792)');
  const d = GLM4V_MODEL_DEFAULTS;
  return {
    patchSize: pre?.patch_size ?? d.patchSize,
    mergeSize: pre?.merge_size ?? d.mergeSize,
    temporalPatchSize: pre?.temporal_patch_size ?? d.temporalPatchSize,
    minPixels: pre?.size?.shortest_edge ?? d.minPixels,
    maxPixels: pre?.size?.longest_edge ?? d.maxPixels,
  };
}

function imageTokens(width: number, height: number, v: VisionConfig): ImageTokens {
  const r = glmImageTokens(width, height, v);
  const cell = v.patchSize * v.mergeSize;
  return {
    resizedWidth: r.resizedWidth,
    resizedHeight: r.resizedHeight,
    gridThw: r.gridThw,
    padCount: r.padCount,
    cellSize: cell,
    cellsWide: r.resizedWidth / cell,
    cellsHigh: r.resizedHeight / cell,
  };
}

function findSpans(tokens: readonly number[], t: GlmIds): MediaSpan[] {
  const spans: MediaSpan[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const headless = i === 0 && (tokens[0] === t.image || tokens[0] === t.video);
    if (tokens[i] !== t.beginOfImage && !headless) continue;
    const padStart = headless ? i : i + 1;
    const pad = tokens[padStart];
    const inVideo = tokens.lastIndexOf(t.beginOfVideo, i) > tokens.lastIndexOf(t.endOfVideo, i);
    const kind = pad === t.video || inVideo ? 'video' : 'image';
    let j = padStart;
    while (j < tokens.length && tokens[j] === pad && (pad === t.image || pad === t.video)) j++;
    const end = j < tokens.length && tokens[j] === t.endOfImage ? j : -1;
    spans.push({ kind, start: headless ? -1 : i, padStart, padLength: j - padStart, end });
    i = end >= 0 ? end : j - 1;
  }
  return spans;
}

export const glm: ModelFamily = {
  name: 'glm',
  label: 'GLM-4.xV',
  modelTypes: { glm4v: 'glm-4.1v', glm4v_moe: 'glm-4.5v', glm46v: 'glm-4.6v' },
  claimsModelName: (name) => GLM_V_NAME.test(name),
  builtinFor: () => undefined,
  recognizesTokenizer: isGlmTokenizer,
  generationFor(files) {
    const modelType = typeof files.config?.model_type === 'string' ? files.config.model_type : undefined;
    return (modelType !== undefined ? this.modelTypes[modelType] : undefined) ?? 'glm-4.1v';
  },
  builtins: [],
  placeholdersFromAddedTokens(added, where) {
    const id = (content: string): number => {
      const t = added.find((a) => a.content === content);
      if (!t) throw new Error(`${where}: the tokenizer has no ${content} token`);
      return t.id;
    };
    const image = id(GLM_TOKENS.image);
    return {
      imageBegin: id(GLM_TOKENS.beginOfImage),
      imageHeader: [],
      imagePad: image,
      pads: [image, id(GLM_TOKENS.video)],
      imageText: { begin: GLM_TOKENS.beginOfImage, header: '', pad: GLM_TOKENS.image, end: GLM_TOKENS.endOfImage },
    };
  },
  ids: (tok, files, where, notes) => glmFamilyIds(glmTokens(tok, files, where, notes)),
  processor: glmProcessor,
  pixelBounds: true,
  imageTokens,
  padCountFromGrid(grid, v) {
    const [t, h, w] = grid;
    if (h % v.mergeSize !== 0 || w % v.mergeSize !== 0)
      throw new Error(`grid [${grid.join(', ')}]: not a multiple of the merge size`);
    return (t * h * w) / (v.mergeSize * v.mergeSize);
  },
  expandMedia(rendered, media, first, ids) {
    const t = glmNamed(ids);
    const out: number[] = [];
    let k = first.images;
    const src = rendered.ids;
    for (let i = 0; i < src.length; i++) {
      const placeholder = src[i] === t.image && src[i - 1] === t.beginOfImage && src[i + 1] === t.endOfImage;
      if (!placeholder) {
        out.push(src[i]!);
        continue;
      }
      const n = media.images[k++]?.pads ?? 1;
      for (let c = 0; c < n; c++) out.push(t.image);
    }
    return out;
  },
  countPlaceholders(ids, family) {
    const t = glmNamed(family);
    let images = 0;
    let videos = 0;
    for (let i = 1; i + 1 < ids.length; i++) {
      if (ids[i] === t.image && ids[i - 1] === t.beginOfImage && ids[i + 1] === t.endOfImage) images++;
      if (ids[i] === t.video && ids[i - 1] === t.beginOfVideo && ids[i + 1] === t.endOfVideo) videos++;
    }
    return { images, videos };
  },
  findMediaSpans: (tokens, ids) => findSpans(tokens, glmNamed(ids)),
  trainerFields: { grids: true, positionIds: 'mrope', mmTokenTypeIds: true, tokenTypeIds: false },
  positionIds(tokens, media, ids, vision) {
    const t = glmNamed(ids);
    if (media.some((m) => m.kind === 'video')) throw new Error('GLM video position ids are not computed here');
    const r = mropePositionIds(
      tokens,
      media.map((m) => m.grid),
      { imagePadId: t.image, videoPadId: t.video, visionStartId: t.beginOfImage, mergeSize: vision.mergeSize },
    );
    return { rows: r.rows, delta: r.delta };
  },
  toolCalls: glm45ToolCalls,
  labels: {
    gmask: 'gMASK',
    sop: 'start of prompt',
    endOfText: 'end of text',
    system: 'system turn',
    user: 'user turn (stop)',
    assistant: 'assistant turn',
    observation: 'observation turn (stop)',
    beginOfImage: 'image start',
    endOfImage: 'image end',
    beginOfVideo: 'video start',
    endOfVideo: 'video end',
    image: 'image pad',
    video: 'video pad',
  },
  explain(cause, token) {
    return cause === 'duplicated_eos'
      ? `the role token ${token} appears twice: it ended the model's turn and the template wrote it again to open the next`
      : undefined;
  },
};
