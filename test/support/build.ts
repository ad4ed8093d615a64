// Builds trajectories the way a real rollout loop does, with the real tokenizer and template:
// `canonical` keeps the generated ids and appends EOS-aware observation suffixes (the fix);
// `legacy` decodes each answer with special tokens and re-renders the whole conversation for
// the next prompt (vime #331's failure).
import type { Message, TrajectoryInput } from '../../server/model/trajectory.ts';
import { Trajectory } from '../../server/model/trajectory.ts';
import type { ModelProfile } from '../../server/profiles/profile.ts';
import { renderTokens, observationSuffixText, tokenizeExpanded, boundaryIds, turnCloseIds } from '../../server/analysis/render.ts';
import { imageTokens } from '../../server/analysis/image-math.ts';

export interface ScriptTurn {
  /** The model's answer text (tokenized with the real tokenizer). */
  answer: string;
  /** Ended by length: no `<|im_end|>` at the end of the generated ids. */
  truncated?: boolean;
  /** Messages that follow the answer (tool results, user follow-ups). */
  observation?: Message[];
}

export interface Script {
  id: string;
  messages: Message[];
  images?: { width: number; height: number }[];
  turns: ScriptTurn[];
}

export async function buildTrajectory(profile: ModelProfile, script: Script, mode: 'canonical' | 'legacy'): Promise<Trajectory> {
  const pads = (script.images ?? []).map((i) => imageTokens(i.width, i.height, profile.vision).padCount);
  const eos = profile.special.eos;
  const closeIds = await turnCloseIds(profile);
  let history: Message[] = script.messages.slice();
  let prompt = (await renderTokens(profile, history, { addGenerationPrompt: true }, pads)).expanded;
  const turns: TrajectoryInput['turns'] = [];
  for (let k = 0; k < script.turns.length; k++) {
    const st = script.turns[k]!;
    const gen = [...(await profile.tokenizer.encode(st.answer)), ...(st.truncated ? [] : [eos])];
    const logprobs = gen.map((_, i) => -0.01 * ((i % 7) + 1));
    turns.push({ messages: history.slice(), promptIds: prompt, generatedIds: gen, generatedLogprobs: logprobs, finishReason: st.truncated ? 'length' : 'stop' });
    if (!st.observation) break;
    const assistantText = mode === 'legacy' ? await profile.tokenizer.decode(gen, false) : await profile.tokenizer.decode(gen, true);
    const nextHistory: Message[] = [...history, { role: 'assistant', content: assistantText }, ...st.observation];
    if (mode === 'legacy') {
      prompt = (await renderTokens(profile, nextHistory, { addGenerationPrompt: true }, pads)).expanded;
    } else {
      const suffix = observationSuffixText(profile, history, st.observation)!;
      const imagesBefore = prompt.filter((t) => t === profile.special.visionStart).length;
      const delta = await tokenizeExpanded(profile, suffix.delta, pads, imagesBefore);
      prompt = [...prompt, ...gen, ...boundaryIds(gen, closeIds, eos), ...delta.expanded];
    }
    history = nextHistory;
  }
  return Trajectory.parse({
    id: script.id,
    source: { file: 'built', line: 1, format: 'native' },
    turns,
    images: (script.images ?? []).map((i) => ({ width: i.width, height: i.height, sizeFrom: 'record' })),
  });
}

export const geometryScript = (id: string): Script => ({
  id,
  messages: [
    {
      role: 'user',
      content: [
        { type: 'image', image: 'diagram.png' },
        { type: 'text', text: 'In the figure, AB = 3 and BC = 4. Find AC. Use the calculator tool.' },
      ],
    },
  ],
  images: [{ width: 640, height: 480 }],
  turns: [
    { answer: 'I will compute the hypotenuse.\n<tool_call>\n{"name": "calc", "arguments": {"expr": "sqrt(3**2+4**2)"}}\n</tool_call>', observation: [{ role: 'tool', content: '5.0' }] },
    { answer: 'AC = 5.' },
  ],
});
