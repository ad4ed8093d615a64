// The playground's routes: render a pasted conversation with the run's model profile (the same
// `renderConversation` as `rollscope render`, server/analysis/ask.ts) and diff the ids against one
// of a trajectory's streams (the same `idsDiff` as the trajectory diffs).
//
//   POST /api/playground/render        PlaygroundRequest → PlaygroundResult
//   GET  /api/playground/conversation?id=ID   → PlaygroundPrefill (the first turn's messages)
//
// A pasted conversation is someone else's text: its images are sized from `width`/`height` or
// `data:` URLs only (`dataUrlSizer`); the server never reads a local file or fetches a URL for it.
import type http from 'node:http';
import {
  MAX_PLAYGROUND_CHARS,
  PlaygroundPrefill,
  PlaygroundRequest,
  PlaygroundResult,
  type VisionSpanInfo,
} from './api.ts';
import type { RunStore } from './store.ts';
import { answer, readJsonBody, RequestError, type ApiRoutes, type RouteTools } from './request-body.ts';
import { availableStreams, cellsWideOfGrid, idsDiff, pieces } from './views.ts';
import { AskInputError, parseConversation, renderConversation, type RenderResult } from '../analysis/ask.ts';
import { renderSemanticsFor } from '../analysis/render.ts';
import { dataUrlSizer } from '../images/sizers.ts';
import { findVisionSpans } from '../analysis/vision-spans.ts';
import { mergeProcessorSettings, statedProcessor } from '../analysis/context.ts';
import { streamTokens, type CheckedTrajectory } from '../pipeline.ts';
import { BUILTIN_PROFILES, profileFor, profileNamed, type ModelProfile } from '../profiles/profile.ts';
import type { Message, ProcessorSettings, Trajectory } from '../model/trajectory.ts';

/** JSON text of the conversation plus the request's other fields (JSON escapes can double a string). */
const MAX_BODY_BYTES = 2 * MAX_PLAYGROUND_CHARS + 64 * 1024;
/** `data:` URLs longer than this are left out of a prefilled conversation (the image's size stands in for it). */
const MAX_PREFILL_DATA_URL = 256;

/** The processor bounds a trajectory states (as analysisContext reads them), else the run's. */
function processorFor(traj: Trajectory | undefined, run: ProcessorSettings | undefined): ProcessorSettings | undefined {
  return mergeProcessorSettings(traj ? statedProcessor(traj) : undefined, run);
}

function visionSpansOf(profile: ModelProfile, ids: readonly number[], rendered: RenderResult): VisionSpanInfo[] {
  let image = 0;
  return findVisionSpans(ids, profile).map((s) => {
    const i = s.kind === 'image' ? image++ : -1;
    const img = rendered.images[i];
    return {
      image: i,
      kind: s.kind,
      start: s.start,
      padStart: s.padStart,
      padLength: s.padLength,
      end: s.end,
      expectedPads: img?.pad_count ?? null,
      gridThw: img?.image_grid_thw ?? null,
      cellsWide: img ? cellsWideOfGrid(profile, img.image_grid_thw, profile.vision) : null,
    };
  });
}

async function targetOf(store: RunStore, id: string): Promise<CheckedTrajectory> {
  const summary = store.summary(id);
  if (!summary) throw new RequestError(404, `no trajectory with id "${id}"`);
  const checked = await store.get(id);
  if (!checked) throw new RequestError(404, `trajectory "${id}" is no longer in ${summary.source.file}`);
  return checked;
}

/** A profile the playground may render with: a built-in, or one the run's trajectories were checked with. */
function chosenProfile(store: RunStore, name: string): ModelProfile {
  const known = new Set<string>([...BUILTIN_PROFILES, ...store.info().models.map((m) => m.profile)]);
  if (!known.has(name))
    throw new RequestError(
      400,
      `profile: "${name}" is neither built in nor one of this run's (${[...known].join(', ')})`,
    );
  return profileNamed(name);
}

async function renderForPlayground(store: RunStore, request: PlaygroundRequest): Promise<PlaygroundResult> {
  const runOpts = store.options();
  const target = request.target ? await targetOf(store, request.target.id) : undefined;
  // The profile asked for; else the trajectory's own when diffing against it (its model may not be
  // the run's default); else the run's.
  const profile = request.profile
    ? chosenProfile(store, request.profile)
    : (target?.profile ?? profileFor(runOpts.model, undefined));
  let rendered: RenderResult;
  try {
    const conversation = parseConversation(request.conversation, 'conversation');
    rendered = await renderConversation(profile, conversation, {
      addGenerationPrompt: request.addGenerationPrompt,
      // Against a trajectory, as the server that rendered its prompts would (a vLLM log's: vLLM's).
      as: target ? renderSemanticsFor(target.trajectory) : 'transformers',
      processor: processorFor(target?.trajectory, runOpts.processor),
      sizeImage: dataUrlSizer,
    });
  } catch (e) {
    if (e instanceof AskInputError) throw new RequestError(400, e.message);
    throw e;
  }
  const ids = rendered.token_ids_expanded;
  let diff: PlaygroundResult['diff'] = null;
  if (target && request.target) {
    const { stream, turn, prefix } = request.target;
    const other = streamTokens(target, stream, turn);
    if (!other)
      throw new RequestError(
        404,
        `trajectory "${request.target.id}" has no ${stream} stream${stream === 'prompt' ? ` for turn ${turn}` : ''}`,
      );
    const label =
      availableStreams(target).find((s) => s.name === stream && (stream !== 'prompt' || s.turn === turn))?.label ??
      stream;
    diff = idsDiff(profile, ids, other, { a: 'rendered here', b: label }, prefix);
  }
  return {
    profile: profile.name,
    text: rendered.text,
    tokenIds: rendered.token_ids,
    ids,
    ...pieces(profile, ids),
    vision: visionSpansOf(profile, ids, rendered),
    images: rendered.images.map((img) => ({
      field: img.field,
      source: img.source,
      width: img.width,
      height: img.height,
      resizedWidth: img.resized_width,
      resizedHeight: img.resized_height,
      gridThw: img.image_grid_thw,
      padCount: img.pad_count,
    })),
    notes: rendered.notes,
    diff,
  };
}

const isImagePart = (part: Record<string, unknown>) => part.type === 'image' || 'image' in part || 'image_url' in part;

/**
 * The first turn's conversation as playground text. Each image part gets the image's size
 * (`width`/`height`, which the renderer reads instead of the bytes), and long `data:` URLs are
 * left out, so the text stays small and rendering it reads nothing. Images are paired with the
 * image parts in order (both follow the order of appearance in the stream).
 */
function prefillFor(id: string, c: CheckedTrajectory): PlaygroundPrefill | undefined {
  const turn = c.trajectory.turns[0];
  if (!turn?.messages || turn.messages.length === 0) return undefined;
  const messages = structuredClone(turn.messages) as Message[];
  // Rendered as vLLM renders (a vLLM log's trajectory), the conversation is the request vLLM took: an
  // image part is `image_url`, a part type vLLM's chat endpoint accepts; the model's `{"type": "image",
  // "image": …}` is what the template sees after it, and vLLM refuses it in a request.
  const asRequest = renderSemanticsFor(c.trajectory) === 'vllm';
  let k = 0;
  for (const message of messages) {
    if (!Array.isArray(message.content)) continue;
    for (const [i, p] of message.content.entries()) {
      if (typeof p === 'string' || !isImagePart(p)) continue;
      let part = p;
      if (asRequest && part.type === 'image' && typeof part.image === 'string') {
        const { image, type: _image, ...rest } = part;
        part = { type: 'image_url', image_url: { url: image }, ...rest };
        message.content[i] = part;
      }
      const img = c.trajectory.images[k++];
      if (img?.width && img.height) {
        part.width = img.width;
        part.height = img.height;
      }
      for (const key of ['image', 'image_url', 'url'] as const) {
        const v = part[key];
        const url =
          typeof v === 'string'
            ? v
            : v && typeof v === 'object' && 'url' in v && typeof v.url === 'string'
              ? v.url
              : undefined;
        if (url?.startsWith('data:') && url.length > MAX_PREFILL_DATA_URL) {
          const elided = `data: URL of ${url.length} characters, left out (the size above stands in for it)`;
          part[key] = typeof v === 'string' ? elided : { ...(v as object), url: elided };
        }
      }
    }
  }
  const doc = turn.tools && turn.tools.length > 0 ? { messages, tools: turn.tools } : { messages };
  return {
    id,
    turn: 0,
    conversation: JSON.stringify(doc, null, 2),
    addGenerationPrompt: true,
    target: turn.promptIds ? { stream: 'prompt', turn: 0 } : { stream: 'canonical', turn: -1 },
  };
}

export function askRoutes(store: RunStore, tools: RouteTools): ApiRoutes {
  return {
    async handle(req: http.IncomingMessage, res: http.ServerResponse, url: URL): Promise<boolean> {
      if (url.pathname === '/api/playground/render') {
        await answer(res, tools, async () => {
          if (req.method !== 'POST') throw new RequestError(405, 'POST a PlaygroundRequest to /api/playground/render');
          const request = await readJsonBody(req, PlaygroundRequest, MAX_BODY_BYTES);
          tools.sendJson(res, PlaygroundResult, await renderForPlayground(store, request));
        });
        return true;
      }
      if (url.pathname === '/api/playground/conversation') {
        await answer(res, tools, async () => {
          if (req.method !== 'GET' && req.method !== 'HEAD') throw new RequestError(405, 'only GET');
          const id = url.searchParams.get('id');
          if (!id) throw new RequestError(400, 'bad query: id: required');
          const prefill = prefillFor(id, await targetOf(store, id));
          if (!prefill) throw new RequestError(404, `trajectory "${id}" has no messages for its first turn`);
          tools.sendJson(res, PlaygroundPrefill, prefill);
        });
        return true;
      }
      return false;
    },
    close() {},
  };
}
