// `rollscope render`: the text a chat template renders for a conversation, and its token ids,
// as transformers/vLLM produce them (server/analysis/ask.ts does the work).
import fs from 'node:fs';
import path from 'node:path';
import { parse, processorOptions, UsageError, type Command } from '../command.ts';
import {
  AskInputError,
  parseConversation,
  parseTools,
  renderConversation,
  type ImageTokensReport,
  type RenderResult,
} from '../../analysis/ask.ts';
import { localImageSizer } from '../../images/sizers.ts';
import { BUILTIN_PROFILES, inferProfileName, loadProfile, type ModelProfile } from '../../profiles/profile.ts';
import { paint } from '../output.ts';

export const MODEL_USAGE = `  --model M          a built-in profile (qwen2.5-vl, qwen3-vl, qwen2.5, qwen3, …; README), a model name
                     (Qwen/Qwen2.5-1.5B-Instruct) or a local model folder (tokenizer.json, chat template,
                     config.json, preprocessor_config.json)`;
export const PIXELS_USAGE = `  --min-pixels N     image processor min_pixels (default: the model's preprocessor_config.json)
  --max-pixels N     image processor max_pixels`;

/** Text of a FILE argument, or stdin for `-` / no argument. Bytes are decoded as UTF-8 and not altered otherwise. */
export function readInputText(arg: string | undefined, what: string): { text: string; source: string; dir: string } {
  if (arg === undefined || arg === '-') {
    if (arg === undefined && process.stdin.isTTY)
      throw new UsageError(`give ${what} as an argument, or pipe it in (use - for stdin)`);
    return { text: readAll(0, '-'), source: '-', dir: process.cwd() };
  }
  return { text: readAll(arg, arg), source: arg, dir: path.dirname(path.resolve(arg)) };
}

function readAll(file: string | number, label: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new AskInputError(
      code === 'ENOENT'
        ? 'no such file'
        : code === 'EISDIR'
          ? 'is a directory, not a file'
          : `cannot read: ${(e as Error).message}`,
      { source: label },
    );
  }
}

/** Run a command body; input rollscope cannot answer for ends with its message and exit status 2. */
export async function answering(name: string, body: () => Promise<number>): Promise<number> {
  try {
    return await body();
  } catch (e) {
    if (!(e instanceof AskInputError)) throw e;
    process.stderr.write(`rollscope ${name}: ${e.message.replace(/\n/g, '\n  ')}\n`);
    return 2;
  }
}

export function requireModel(
  model: string | undefined,
  fallback?: string,
  processor?: { minPixels?: number; maxPixels?: number },
): ModelProfile {
  const spec = model ?? (fallback !== undefined ? inferProfileName(fallback) : undefined);
  if (spec === undefined)
    throw new UsageError(`--model is required (${BUILTIN_PROFILES.join(', ')}, a model name or a model folder)`);
  const profile = loadProfile(spec);
  // The flags bound a family's resize only where its processor has min/max pixels (ModelFamily.pixelBounds).
  if (!profile.modelFamily.pixelBounds && (processor?.minPixels !== undefined || processor?.maxPixels !== undefined))
    throw new UsageError(
      `--min-pixels/--max-pixels do not apply to ${profile.name}: ${profile.modelFamily.label}'s image processor has no min/max pixels`,
    );
  return profile;
}

/** One image's answer on one line: `640×480 → 644×476, grid [1, 34, 46], 391 pads`. */
export function imageLine(r: ImageTokensReport): string {
  return `${r.width}×${r.height} → ${r.resized_width}×${r.resized_height}, image_grid_thw [${r.image_grid_thw.join(', ')}], ${r.pad_count} pads`;
}

function printRendered(out: NodeJS.WritableStream, r: RenderResult): void {
  out.write(r.text.endsWith('\n') ? r.text : `${r.text}\n`);
  out.write(paint.dim(`── ${r.token_ids.length} token ids ──\n`));
  out.write(`${r.token_ids.join(' ')}\n`);
  if (r.images.length > 0) {
    out.write(
      paint.dim(
        `── ${r.token_ids_expanded.length} token ids with ${r.images.length} image${r.images.length === 1 ? '' : 's'} expanded ──\n`,
      ),
    );
    r.images.forEach((img, i) => {
      const p = img.processor;
      out.write(
        `image ${i + 1} (${img.field}, ${img.source}): ${imageLine(img)}  [min_pixels ${p.min_pixels}, max_pixels ${p.max_pixels}]\n`,
      );
    });
  }
  for (const note of r.notes) out.write(paint.yellow(`note: ${note}\n`));
}

export const command: Command = {
  name: 'render',
  summary: 'render a conversation with the model chat template and print the text and its token ids',
  usage: `rollscope render --model M [--as transformers|vllm|sglang] [--add-generation-prompt] [--tools FILE] [--json] [FILE|-]

Reads an OpenAI-style conversation {"messages": [...], "tools"?: [...], "chat_template_kwargs"?: {...}}
(or a bare list of messages) from FILE or stdin, parsed as Python's json.loads parses it, and renders
it as transformers' apply_chat_template does (--as vllm / --as sglang: as that server's chat endpoint
does, which first prepares the messages: content null, parts, tool results, tool-call arguments;
a request the server would refuse is an error). Images are data: URLs, local files
(relative to FILE's folder) or parts with "width" and "height"; each image's placeholder is
expanded to its real count in token_ids_expanded.

Exit status: 0 on success; 2 on bad arguments, bad JSON, an unreadable image or a template error.

${MODEL_USAGE}
  --add-generation-prompt
                     end with the assistant turn opener the template writes
  --tools FILE       tool definitions (a JSON list, or {"tools": [...]}); replaces the document's tools
  --as S             transformers (default): the messages as given, string tool-call arguments verbatim;
                     vllm: vLLM's request handling first (vllm/entrypoints/chat_utils.py parse_chat_messages:
                     content null is no parts, string content one text part, image parts {"type": "image"},
                     text-only tool results one string, string arguments json.loads-ed so tojson
                     re-serializes them; a tool call that is not {"type": "function", "function": {...}}
                     or a part type vLLM does not know is an error);
                     sglang: SGLang's (content null is "", tool results joined with " ", arguments decoded)
  --raw-arguments    the same as --as transformers
  --image-root DIR   also allow local images under DIR (default: FILE's folder and the current folder)
${PIXELS_USAGE}
  --json             {"text", "token_ids", "token_ids_expanded", "images", "notes"}`,
  async run(argv) {
    const { values, positionals } = parse(argv, {
      model: { type: 'string' },
      'add-generation-prompt': { type: 'boolean', default: false },
      tools: { type: 'string' },
      as: { type: 'string', default: 'transformers' },
      'raw-arguments': { type: 'boolean', default: false },
      'image-root': { type: 'string', multiple: true },
      'min-pixels': { type: 'string' },
      'max-pixels': { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    });
    if (positionals.length > 1) throw new UsageError('render takes one conversation FILE (or - for stdin)');
    if (values.as !== 'transformers' && values.as !== 'vllm' && values.as !== 'sglang')
      throw new UsageError(`--as takes transformers, vllm or sglang, not "${values.as}"`);
    const as = values['raw-arguments'] === true ? 'transformers' : values.as;
    const processor = processorOptions(values);
    return answering('render', async () => {
      const input = readInputText(positionals[0], 'a conversation FILE');
      const conversation = parseConversation(input.text, input.source);
      const profile = requireModel(values.model, conversation.model, processor);
      const tools =
        values.tools !== undefined
          ? parseTools(readInputText(values.tools, '--tools FILE').text, values.tools)
          : undefined;
      const roots = [input.dir, process.cwd(), ...(values['image-root'] ?? [])];
      const result = await renderConversation(profile, conversation, {
        addGenerationPrompt: values['add-generation-prompt'] === true,
        tools,
        processor,
        as,
        sizeImage: localImageSizer({ baseDir: input.dir, roots }),
      });
      if (values.json) process.stdout.write(`${JSON.stringify(result)}\n`);
      else printRendered(process.stdout, result);
      return 0;
    });
  },
};
