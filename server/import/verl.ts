// verl agent-loop output as JSON or JSONL: one `AgentLoopOutput` per record (volcengine/verl:
// verl/experimental/agent_loop/agent_loop.py, v0.8; docs/reference/frameworks.md#verl-agent-loop), unpadded:
//   prompt_ids          prompt ids from the HF processor (image pads expanded)
//   response_ids        everything after the prompt: LLM tokens and tool/observation tokens
//   response_mask       per response token, 1 = LLM generated, 0 = tool response
//   response_logprobs   per response token (0.0 for tool tokens), optional
//   multi_modal_data    {"images": [...]} — every image of the trajectory, tool images included
//   multi_modal_inputs  processor outputs over all images, `image_grid_thw` [n, 3] (the padded
//                       `_InternalAgentLoopOutput` carries it; a dump hook may add it here)
//   reward_score, num_turns (user + assistant + tool turns), extra_fields.raw_prompt (the messages)
// Tool responses are rendered with the chat template and appended with mask 0 and logprob 0.0
// (verl/experimental/agent_loop/tool_agent_loop.py), so the turns are the mask's runs.
import { z } from 'zod';
import { Message, Reward, type TrajectoryInput } from '../model/trajectory.ts';
import type { Importer, ImportResult } from './importer.ts';
import { importEachRecord, isObject } from './importer.ts';
import {
  ImageEntry,
  LogprobValues,
  MaskValues,
  TokenIdValues,
  ProcessorOutputs,
  fileStem,
  gridsOf,
  videosOf,
  idAllocator,
  imageRefOf,
  smallValues,
  statedModel,
  turnsFromMask,
} from './turns-from-mask.ts';

export const VerlAgentLoopOutput = z
  .object({
    prompt_ids: TokenIdValues,
    response_ids: TokenIdValues,
    response_mask: MaskValues,
    response_logprobs: LogprobValues.nullish(),
    // The trainer's side, when a batch is dumped per sample after the actor's recompute (DataProto
    // `old_log_probs`) and the reference model's (`ref_log_prob`), over the response like the mask.
    old_log_probs: LogprobValues.nullish(),
    ref_log_prob: LogprobValues.nullish(),
    // verl's datasets name the key `image` (RLHFDataset) and the agent loop `images`.
    multi_modal_data: z
      .object({
        images: z.array(ImageEntry).nullish(),
        image: z.array(ImageEntry).nullish(),
        videos: z.unknown().optional(),
        video: z.unknown().optional(),
      })
      .passthrough()
      .nullish(),
    multi_modal_inputs: ProcessorOutputs.nullish(),
    reward_score: Reward.nullish(),
    num_turns: z.number().int().nonnegative().nullish(),
    extra_fields: z
      .object({ raw_prompt: z.union([z.array(Message), z.string()]).nullish() })
      .passthrough()
      .nullish(),
    request_id: z.string().nullish(),
    uid: z.union([z.string(), z.number()]).nullish(),
  })
  .passthrough();
export type VerlAgentLoopOutput = z.infer<typeof VerlAgentLoopOutput>;

export function verlTrajectory(
  o: VerlAgentLoopOutput,
  where: { file: string; line: number; id: string },
): TrajectoryInput {
  const tokens = [...o.prompt_ids, ...o.response_ids];
  const logprobs = o.response_logprobs ?? undefined;
  const turns = turnsFromMask({
    tokens,
    scope: 'response',
    responseLength: o.response_ids.length,
    mask: o.response_mask,
    logprobs,
  });
  const rawPrompt = o.extra_fields?.raw_prompt;
  if (Array.isArray(rawPrompt) && turns[0]) turns[0].messages = rawPrompt;

  const images = o.multi_modal_data?.images ?? o.multi_modal_data?.image ?? [];
  const videos =
    o.multi_modal_data?.videos !== undefined
      ? videosOf(o.multi_modal_data.videos, 'multi_modal_data.videos')
      : videosOf(o.multi_modal_data?.video, 'multi_modal_data.video');
  const limitations: string[] = [];
  const extra = o.extra_fields ? smallValues(o.extra_fields, ['raw_prompt']) : {};
  const meta = smallValues({
    num_turns: o.num_turns,
    metrics: o.metrics,
    extra_fields: Object.keys(extra).length > 0 ? extra : undefined,
  });
  return {
    id: where.id,
    source: { file: where.file, line: where.line, format: 'verl' },
    model: statedModel(o, ['model', 'extra_fields.model', 'extra_fields.model_name']),
    turns,
    images: images.map(imageRefOf),
    ...(videos.length > 0 ? { videos } : {}),
    sample: {
      tokens,
      responseLength: o.response_ids.length,
      lossMask: o.response_mask,
      logprobs,
      ...(o.old_log_probs ? { trainerLogprobs: o.old_log_probs } : {}),
      ...(o.ref_log_prob ? { refLogprobs: o.ref_log_prob } : {}),
      maskScope: 'response',
      imageGridThw: gridsOf(o.multi_modal_inputs),
      videoGridThw: gridsOf(o.multi_modal_inputs, 'video'),
    },
    reward: o.reward_score ?? undefined,
    group: o.uid !== undefined && o.uid !== null ? String(o.uid) : undefined,
    limitations,
    meta: Object.keys(meta).length > 0 ? meta : undefined,
  };
}

export const verlImporter: Importer = {
  format: 'verl',
  description:
    'verl agent-loop output as JSON/JSONL ({"prompt_ids", "response_ids", "response_mask", "response_logprobs", "multi_modal_data", ...})',
  container: 'jsonl',
  sniff(record) {
    if (!isObject(record)) return 'not a JSON object';
    if (!Array.isArray(record.prompt_ids) || !Array.isArray(record.response_ids))
      return 'no "prompt_ids" and "response_ids" arrays (verl AgentLoopOutput)';
    // Agent Lightning's verl daemon writes prompt_ids/response_ids too, but never a response_mask.
    if (!Array.isArray(record.response_mask))
      return 'has "prompt_ids"/"response_ids" but no "response_mask" array (every verl AgentLoopOutput has one)';
    return true;
  },
  importRecords(records, { file }): ImportResult {
    const allocate = idAllocator();
    const stem = fileStem(file);
    return importEachRecord(records, file, VerlAgentLoopOutput, (o, r) => {
      const requestId =
        o.request_id ?? (typeof o.extra_fields?.request_id === 'string' ? o.extra_fields.request_id : undefined);
      return verlTrajectory(o, { file, line: r.line, id: allocate(requestId ?? `${stem}:${r.line}`) });
    });
  },
};
