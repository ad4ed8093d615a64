// Gemma 4, GLM-4.1V and Kimi K2.5 through the checks (issue 32: "each with planted breaks of its own
// traps"), from the model folders the tests build (test/support/*-folder.ts; what is real and what is
// built: docs/reference/models/). A two-turn conversation is built as a rollout loop that keeps the
// generated ids builds it (server/demo/build.ts, `canonical`); then the turn's end is written twice
// in the next prompt, as a loop that re-renders after an answer decoded with its special tokens
// does: Gemma 4's `<turn|>`, Kimi's `<|im_end|>`, and GLM's stop token `<|user|>`, which is also the
// next turn's opener (no end-of-turn token of its own). Each is found at the second occurrence,
// worded with the family's token; the clean build has no error and no false missing end of turn.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadProfile, type ModelProfile } from '../server/profiles/profile.ts';
import { checkTrajectory } from '../server/analysis/checks.ts';
import { analysisContext } from '../server/analysis/context.ts';
import type { Finding } from '../server/model/finding.ts';
import type { Trajectory } from '../server/model/trajectory.ts';
import { buildTrajectory, type Script } from './support/build.ts';
import { writeGemma4Folder } from './support/gemma4-folder.ts';
import { writeGlmFolder } from './support/glm-folder.ts';
import { writeKimiFolder } from './support/kimi-folder.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-planted-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const script = (id: string): Script => ({
  id,
  messages: [{ role: 'user', content: 'What is 2 + 2?' }],
  turns: [{ answer: 'It is 4.', observation: [{ role: 'user', content: 'Why?' }] }, { answer: 'Because 2 + 2 = 4.' }],
});

const check = async (t: Trajectory, p: ModelProfile): Promise<Finding[]> =>
  (await checkTrajectory(t, analysisContext(t, p))).findings;

/** The trajectory with turn 1's prompt holding the token that ended turn 0 a second time, right after it. */
function withEndTwice(t: Trajectory): { broken: Trajectory; at: number; token: number } {
  const [t0, t1] = t.turns;
  const at = t0!.promptIds!.length + t0!.generatedIds!.length;
  const token = t0!.generatedIds![t0!.generatedIds!.length - 1]!;
  const prompt = t1!.promptIds!;
  const turns = [t0!, { ...t1!, promptIds: [...prompt.slice(0, at), token, ...prompt.slice(at)] }];
  return { broken: { ...t, turns }, at, token };
}

const FAMILIES: [string, (dir: string) => string, string, RegExp][] = [
  ['gemma4', writeGemma4Folder, '<turn|>', /`<turn\|>` appears twice/],
  ['glm', writeGlmFolder, '<|user|>', /the role token `<\|user\|>` appears twice: it ended the model's turn/],
  ['kimi', writeKimiFolder, '<|im_end|>', /`<\|im_end\|>` appears twice/],
];

describe.each(FAMILIES)('%s: the end of a turn written twice', (name, write, endText, wording) => {
  let p: ModelProfile;
  let clean: Trajectory;

  it('the clean rollout (generated ids kept, the template suffix after them) has no error and no prefix break', async () => {
    p = loadProfile(write(fs.mkdtempSync(path.join(tmp, `${name}-`))));
    expect(p.modelFamily.name).toBe(name);
    clean = await buildTrajectory(p, script(`${name}-clean`), 'canonical');
    // The turn ends with the family's token.
    const gen = clean.turns[0]!.generatedIds!;
    expect(p.tokenizer.piece(gen[gen.length - 1]!)).toBe(endText);
    const found = await check(clean, p);
    expect(found.filter((f) => f.severity === 'error')).toEqual([]);
    expect(found.filter((f) => f.kind === 'prefix_break')).toEqual([]);
    // The last answer's stop is not a missing end of turn where the template writes it only before
    // a next turn (GLM). The warnings left are the families' own re-render traps (Gemma 4's empty
    // thought channel, Kimi's `<think></think>` in the history: docs/reference/models/).
    expect(found.map((f) => f.cause)).not.toContain('missing_eos');
  }, 300_000);

  it('written twice in the next prompt: a prefix break at the second one, in the family’s words', async () => {
    const { broken, at, token } = withEndTwice(clean);
    const found = await check(broken, p);
    const prefix = found.filter((f) => f.kind === 'prefix_break');
    expect(prefix).toHaveLength(1);
    expect(prefix[0]).toMatchObject({
      cause: 'duplicated_eos',
      severity: 'error',
      turn: 1,
      index: at,
      stream: 'prompt',
      actual: [token],
    });
    expect(prefix[0]!.message).toMatch(wording);
  });
});
