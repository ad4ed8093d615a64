// Checks on what the source itself states: findings the importer made while reading and grouping
// (`Trajectory.sourceFindings`), a prompt cut on the left inside an image, and the prompt length
// the engine reported (vLLM `usage.prompt_tokens`, SGLang `meta_info.prompt_tokens`) against the
// prompt ids rollscope holds or renders.
import type { Finding } from '../model/finding.ts';
import type { Trajectory } from '../model/trajectory.ts';
import { type AnalysisContext, expectedPadCounts } from './context.ts';
import { renderSemanticsFor, renderTokens } from './render.ts';
import { checkLeftTruncation } from './truncation.ts';

export async function checkSources(traj: Trajectory, ctx: AnalysisContext): Promise<Finding[]> {
  return [...(traj.sourceFindings ?? []), ...checkLeftTruncation(traj, ctx), ...(await checkStatedPromptTokens(traj, ctx))];
}

/**
 * `prompt_tokens_mismatch`: the engine's count of prompt tokens against the prompt ids the data
 * holds (an error: the log contradicts itself), or, without ids, against the messages rendered
 * with the profile's template (a warning: the server used another template or system prompt).
 */
export async function checkStatedPromptTokens(traj: Trajectory, ctx: AnalysisContext): Promise<Finding[]> {
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
    if (!t.messages) continue;
    let rendered: number[];
    try {
      rendered = (
        await renderTokens(
          ctx.profile,
          t.messages,
          { addGenerationPrompt: true, tools: t.tools, as: renderSemanticsFor(traj) },
          expectedPadCounts(ctx),
        )
      ).expanded;
    } catch {
      continue;
    }
    if (rendered.length === stated) continue;
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
