// `rollscope image-tokens`: how the model's image processor sizes an image and how many
// image pad tokens it becomes (smart_resize, image_grid_thw, pad count; docs/reference/image-math.md).
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { parse, processorOptions, UsageError, type Command } from '../command.ts';
import { AskInputError, ImageTokensReport, imageTokensFor, parseSizeSpec } from '../../analysis/ask.ts';
import { localImageSizer } from '../../images/sizers.ts';
import type { ModelProfile } from '../../profiles/profile.ts';
import type { ProcessorSettings } from '../../model/trajectory.ts';
import { paint } from '../output.ts';
import { answering, imageLine, MODEL_USAGE, PIXELS_USAGE, requireModel } from './render.ts';

/** `image-tokens --json`: one entry per argument, in order. */
export const ImageTokensOutput = z.object({
  model: z.string(),
  images: z.array(
    z.union([ImageTokensReport.extend({ input: z.string() }), z.object({ input: z.string(), error: z.string() })]),
  ),
});
export type ImageTokensOutput = z.infer<typeof ImageTokensOutput>;

type Entry = ImageTokensOutput['images'][number];

async function sizeOf(arg: string): Promise<{ width: number; height: number }> {
  const size = parseSizeSpec(arg);
  if (size) return size;
  if (!arg.startsWith('data:') && !fs.existsSync(arg)) {
    throw new AskInputError(`no such image file (give WxH, e.g. 640x480, or an image path)`, { source: arg });
  }
  // The user named this file on the command line, so its own folder is the allowed root.
  const dir = path.dirname(path.resolve(arg));
  try {
    return await localImageSizer({ baseDir: process.cwd(), roots: [dir] })(arg);
  } catch (e) {
    throw new AskInputError((e as Error).message, { source: arg.startsWith('data:') ? 'data: URL' : arg });
  }
}

async function answer(profile: ModelProfile, arg: string, processor: ProcessorSettings): Promise<Entry> {
  const size = await sizeOf(arg);
  const input = arg.startsWith('data:') ? 'data: URL' : arg;
  try {
    return { input, ...imageTokensFor(profile, size, processor) };
  } catch (e) {
    // Not bad input: the processor itself rejects such an image (aspect ratio over 200).
    return { input, error: (e as Error).message };
  }
}

function printEntry(e: Entry, processor: ProcessorSettings): string {
  if ('error' in e) return `${e.input}: ${paint.red(`rejected by the processor: ${e.error}`)}\n`;
  const p = e.processor;
  const from = (set: number | undefined) => (set !== undefined ? ' (given)' : '');
  let out = `${e.input}: ${imageLine(e)}\n`;
  out += paint.dim(
    `  processor: patch_size ${p.patch_size}, merge_size ${p.merge_size}, min_pixels ${p.min_pixels}${from(processor.minPixels)}, max_pixels ${p.max_pixels}${from(processor.maxPixels)}\n`,
  );
  const b = e.qwen_vl_utils;
  if (b && 'error' in b) out += paint.yellow(`  qwen-vl-utils smart_resize: ${b.error}\n`);
  else if (b)
    out += paint.yellow(
      `  qwen-vl-utils smart_resize differs: ${b.resized_width}×${b.resized_height}, image_grid_thw [${b.image_grid_thw.join(', ')}], ${b.pad_count} pads\n`,
    );
  return out;
}

export const command: Command = {
  name: 'image-tokens',
  summary: 'resized size, image_grid_thw and pad count of images under the model processor',
  usage: `rollscope image-tokens --model M [--min-pixels N] [--max-pixels N] [--json] WxH|IMAGE...

For each image (a size such as 640x480, or an image file / data: URL whose size sharp reads):
the size transformers' and vLLM's smart_resize give, image_grid_thw, the number of image pad
tokens, the processor settings used, and qwen-vl-utils' smart_resize result when it differs.

Exit status: 0 on success; 1 when the processor rejects an image (aspect ratio over 200);
2 on bad arguments or an unreadable image.

${MODEL_USAGE}
${PIXELS_USAGE}
  --json             {"model", "images": [{"input", "width", "height", "resized_width", "resized_height",
                     "image_grid_thw", "pad_count", "processor", "qwen_vl_utils"?} | {"input", "error"}]}`,
  async run(argv) {
    const { values, positionals } = parse(argv, {
      model: { type: 'string' },
      'min-pixels': { type: 'string' },
      'max-pixels': { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    });
    const processor = processorOptions(values);
    if (positionals.length === 0) throw new UsageError('give at least one image: WxH (e.g. 640x480) or an image file');
    return answering('image-tokens', async () => {
      const profile = requireModel(values.model, undefined, processor);
      const images: Entry[] = [];
      for (const arg of positionals) images.push(await answer(profile, arg, processor));
      const output: ImageTokensOutput = { model: profile.name, images };
      if (values.json) process.stdout.write(`${JSON.stringify(output)}\n`);
      else for (const e of images) process.stdout.write(printEntry(e, processor));
      return images.some((e) => 'error' in e) ? 1 : 0;
    });
  },
};
