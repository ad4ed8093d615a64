// Checks on what the source itself states: findings the importer made while reading and grouping
// (`Trajectory.sourceFindings`), a prompt cut on the left inside an image, and the prompt length
// the engine reported (vLLM `usage.prompt_tokens`, SGLang `meta_info.prompt_tokens`) against the
// prompt ids rollscope holds or renders.
import type { DivergenceCause, Finding } from '../model/finding.ts';
import type { Trajectory } from '../model/trajectory.ts';
import { type AnalysisContext, expectedMedia } from './context.ts';
import { renderSemanticsFor, renderTokens } from './render.ts';
import { checkLeftTruncation } from './truncation.ts';
import { firstDivergence } from './classify.ts';
import { StepFailures } from './analysis-failed.ts';

export async function checkSources(
  traj: Trajectory,
  ctx: AnalysisContext,
  failures: StepFailures = new StepFailures(),
): Promise<Finding[]> {
  return [
    ...(traj.sourceFindings ?? []).map((f) => (f.kind === 'chain_split' ? classifyChainSplit(f, traj, ctx) : f)),
    ...checkChatFormat(traj, ctx),
    ...checkLeftTruncation(traj, ctx),
    ...(await checkStatedPromptTokens(traj, ctx, failures)),
  ];
}

/**
 * Agent Lightning's v0.2 daemon classes of a merge mismatch (agentlightning/verl/daemon.py
 * `strict_startswith_with_log`): `retoken` when the ids differ but the text is the same,
 * `template` when the chat template rendered the history otherwise (special tokens, the
 * default system prompt, the turn boundary), else `others`.
 */
function mergeMismatchClass(cause: DivergenceCause): 'template' | 'retoken' | 'others' {
  if (cause === 'retokenized') return 'retoken';
  return cause === 'other' || cause === 'image_tokens_changed' ? 'others' : 'template';
}

/**
 * A `chain_split` from the importer carries the tail of the context the call broke from
 * (`expected`, ids from `index` on); classified here with the tokenizer (firstDivergence) and
 * named with the class Agent Lightning logs.
 */
export function classifyChainSplit(f: Finding, traj: Trajectory, ctx: AnalysisContext): Finding {
  const prompt = traj.turns[f.turn]?.promptIds;
  if (!prompt || !Array.isArray(f.expected) || f.index < 0) return f;
  const context = [...prompt.slice(0, f.index), ...(f.expected as number[])];
  const d = firstDivergence(ctx.profile, context, prompt, { prefixOnly: true });
  if (!d) return f;
  const cls = mergeMismatchClass(d.cause);
  const cause: DivergenceCause = cls === 'template' && d.cause === 'missing_eos' ? 'template_changed' : d.cause;
  const why =
    cls === 'retoken'
      ? 'the same text as other token ids (the history was re-tokenized)'
      : cls === 'template'
        ? 'the chat template rendered the history otherwise'
        : 'the history was rewritten, or the call belongs to another conversation';
  return {
    ...f,
    cause,
    index: d.actualIndex,
    expected: d.expectedTokens,
    actual: d.actualTokens,
    message: `${f.message}: ${cls}_mismatch, ${why}${cause === d.cause ? ` (${d.explanation})` : ''}`,
  };
}

/**
 * `chat_format_unrecognized`: token ids with no turn opener of the model's family anywhere do not
 * follow the profile's chat format (a raw-text agent, another model's template): the boundary
 * rules (the end of turn and what follows it between turns, assistant-turn masks) do not apply,
 * and the prefix check compares plain concatenation instead. One warning per trajectory.
 */
export function checkChatFormat(traj: Trajectory, ctx: AnalysisContext): Finding[] {
  const { grammar } = ctx.profile.ids;
  if (followsChatFormat(traj, grammar.openers) !== false) return [];
  const opener = grammar.openers.map((id) => ctx.profile.tokenizer.piece(id)).join(', ');
  const close = [...(grammar.endOfTurn !== undefined ? [grammar.endOfTurn] : []), ...grammar.afterEnd]
    .map((id) => ctx.profile.tokenizer.piece(id))
    .join('')
    .replace(/\n/g, '\\n');
  return [
    {
      kind: 'chat_format_unrecognized',
      severity: 'warning',
      turn: -1,
      index: -1,
      message: `the token ids hold no ${opener}: they do not follow the ${ctx.profile.name} chat format (a raw-text prompt or another template), so the turn-boundary rules (${close} after each answer, assistant-only masks) were skipped; prefixes are compared as plain concatenation`,
    },
  ];
}

/** False when the trajectory holds token ids and none of them opens a turn (`openers`); undefined when it holds no ids. */
export function followsChatFormat(traj: Trajectory, openers: readonly number[]): boolean | undefined {
  let holdsIds = false;
  const has = (ids: readonly number[] | undefined) => {
    if (!ids || ids.length === 0) return false;
    holdsIds = true;
    for (const id of openers) if (ids.includes(id)) return true;
    return false;
  };
  if (has(traj.sample?.tokens)) return true;
  for (const t of traj.turns) if (has(t.promptIds)) return true;
  return holdsIds ? false : undefined;
}

/**
 * `prompt_tokens_mismatch`: the engine's count of prompt tokens against the prompt ids the data
 * holds (an error: the log contradicts itself), or, without ids, against the messages rendered
 * with the profile's template (a warning: the server used another template or system prompt).
 */
export async function checkStatedPromptTokens(
  traj: Trajectory,
  ctx: AnalysisContext,
  failures: StepFailures = new StepFailures(),
): Promise<Finding[]> {
  const out: Finding[] = [];
  for (let k = 0; k < traj.turns.length; k++) {
    const t = traj.turns[k]!;
    const stated = t.statedPromptTokens;
    if (stated === undefined) continue;
    if (t.promptIds) {
      if (t.promptIds.length !== stated)
        out.push({
          kind: 'prompt_tokens_mismatch',
          severity: 'error',
          turn: k,
          index: Math.min(stated, t.promptIds.length),
          stream: 'prompt',
          expected: stated,
          actual: t.promptIds.length,
          message: `the engine reported ${stated} prompt tokens for turn ${k} but the log holds ${t.promptIds.length} prompt ids: the ids belong to another request, or were cut or padded after the call`,
        });
      continue;
    }
    // Rendering needs the model's template: not for a model no profile covers.
    if (!t.messages || ctx.profile.uncoveredModel !== undefined) continue;
    const messages = t.messages;
    const rendered = (
      await failures.guard('render', { turn: k, field: `turns.${k}.messages` }, () =>
        renderTokens(
          ctx.profile,
          messages,
          { addGenerationPrompt: true, tools: t.tools, as: renderSemanticsFor(traj) },
          expectedMedia(ctx),
        ),
      )
    )?.expanded;
    if (rendered === undefined || rendered.length === stated) continue;
    out.push({
      kind: 'prompt_tokens_mismatch',
      severity: 'warning',
      turn: k,
      index: -1,
      stream: 'prompt',
      expected: stated,
      actual: rendered.length,
      message: `the engine reported ${stated} prompt tokens for turn ${k}; rendering its messages with the ${ctx.profile.name} template gives ${rendered.length}: the server used another chat template or system prompt (or other image settings), so re-rendered prompts are not what the model saw`,
    });
  }
  return out;
}
