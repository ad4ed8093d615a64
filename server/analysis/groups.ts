// Checks over a GRPO group: the samples a trainer generated for one prompt and compares with
// each other. Each sample's advantage is its reward against the group's, so a group whose
// rewards are all equal gives every sample zero advantage and teaches nothing; a group of
// token-identical samples is the same failure one step earlier (the policy collapsed, or the
// sampler ignored its temperature); a group whose samples were asked different prompts (token
// ids or images) is not a group at all. Runs can be huge and are read as a stream: a group keeps
// running aggregates and a few hashes (its first sample's, up to MAX_PROMPTS prompts'), never
// one per member nor the trajectories.
import { createHash } from 'node:crypto';
import type { Finding } from '../model/finding.ts';
import type { Trajectory } from '../model/trajectory.ts';
import { imagesInMessages } from '../model/message-images.ts';
import type { VisionIds } from '../profiles/profile.ts';

/** What a group check needs to know of one sample. */
export interface GroupMember {
  group: string;
  step?: number;
  reward?: number | null;
  advantage?: number;
  /** Hash of what the policy was asked: the prompt's token ids (else its messages) and the images it shows. */
  prompt?: string;
  /** Hash of what it answered: the generated token ids (else the response tail, else the text). */
  sample?: string;
}

/** One group as `check --json` reports it (docs/check-json.md). */
export interface GroupSummary {
  id: string;
  step: number | null;
  size: number;
  reward_mean: number | null;
  /** Population standard deviation of the stated rewards (what GRPO normalises by). */
  reward_std: number | null;
  /** All rewards equal, or all samples token-identical: the group gives no learning signal. */
  degenerate: boolean;
  findings: Finding[];
}

/** Distinct prompts a group remembers: past this it is mixed anyway. */
const MAX_PROMPTS = 16;

interface GroupState {
  id: string;
  step: number | null;
  size: number;
  rewards: number;
  rewardMean: number;
  /** Welford's sum of squared differences from the mean. */
  rewardM2: number;
  rewardMin: number;
  rewardMax: number;
  prompts: Set<string>;
  promptsKnown: number;
  /** The first sample hash, and whether any later one differed: all "token-identical" needs (no set of every member's hash). */
  firstSample: string | undefined;
  samplesDiffer: boolean;
  samplesKnown: number;
}

/** Token ids as 32-bit words for hashing, in one buffer reused across calls (hashing is synchronous). */
let words = new Uint32Array(1 << 14);

/** SHA-1 of a tag, token id lists (as uint32 words, end to end) and text. */
function digest(tag: string, lists: readonly (readonly number[] | undefined)[], text?: string): string {
  const h = createHash('sha1').update(tag);
  let total = 0;
  for (const l of lists) total += l?.length ?? 0;
  if (total > words.length) words = new Uint32Array(Math.max(total, words.length * 2));
  let at = 0;
  for (const l of lists) if (l) for (let i = 0; i < l.length; i++) words[at++] = l[i]!;
  if (total > 0) h.update(words.subarray(0, total));
  if (text !== undefined) h.update(text);
  return h.digest('base64');
}

/** Images the prompt's ids show: an image's begin token, its header, then its pad (expanded or not). */
function imageSpansIn(ids: readonly number[], vision: VisionIds): number {
  const h = vision.imageHeader;
  let n = 0;
  for (let i = 0; i + 1 + h.length < ids.length; i++) {
    if (ids[i] !== vision.imageBegin || ids[i + 1 + h.length] !== vision.imagePad) continue;
    if (h.every((id, k) => ids[i + 1 + k] === id)) n++;
  }
  return n;
}

/** What the samples of one group share: the prompt's ids (or first messages) and the images it shows. */
export function promptHash(t: Trajectory, vision: VisionIds | undefined): string | undefined {
  const first = t.turns[0];
  const s = t.sample;
  // The trainer's prompt (the sample's tokens before its response) when there is one: GRPO groups are
  // the trainer's, and turns cut from a loss mask would move the prompt's end with a shifted mask
  // (a fault of that sample, reported on it, not a second prompt of its group).
  const ids =
    s?.responseLength !== undefined && s.responseLength <= s.tokens.length
      ? s.tokens.slice(0, s.tokens.length - s.responseLength)
      : first?.promptIds;
  // Only the images the prompt shows: a tool that returns an image (a zoom, a screenshot) gives each
  // sample its own later images, and the samples were still asked the same question.
  const shown =
    ids && vision
      ? imageSpansIn(ids, vision)
      : first?.messages
        ? imagesInMessages(first.messages).length
        : t.images.length;
  const images = t.images
    .slice(0, shown)
    .map((im) => im.sha256 ?? im.url ?? '?')
    .join('\n');
  if (ids) return digest('ids', [ids], images);
  if (first?.messages) return digest('messages', [], `${JSON.stringify(first.messages)}\n${images}`);
  return undefined;
}

function sampleHash(t: Trajectory): string | undefined {
  const generated = t.turns.flatMap((turn) => [turn.generatedIds, turn.observationIds]);
  if (generated.some((l) => l && l.length > 0)) return digest('ids', generated);
  const s = t.sample;
  if (s?.responseLength !== undefined && s.responseLength > 0)
    return digest('ids', [s.tokens.slice(s.tokens.length - s.responseLength)]);
  const texts = t.turns.map((turn) => turn.generatedText);
  if (texts.some((x) => x !== undefined)) return digest('text', [], JSON.stringify(texts));
  return undefined;
}

/**
 * The group member a trajectory is, or undefined when it names no group. `vision`: the placeholder
 * ids of its profile (none for a model no profile covers: the images its messages show count).
 */
export function groupMember(t: Trajectory, vision: VisionIds | undefined): GroupMember | undefined {
  if (t.group === undefined) return undefined;
  return {
    group: t.group,
    step: t.step,
    reward: t.reward,
    advantage: t.advantage,
    prompt: promptHash(t, vision),
    sample: sampleHash(t),
  };
}

/** The key a group is known by in a run: the same group id at two steps is two groups. */
export function groupKey(m: Pick<GroupMember, 'group' | 'step'>): string {
  return `${m.step ?? ''}\u0000${m.group}`;
}

const where = (g: GroupState) => `group ${g.id}${g.step !== null ? ` (step ${g.step})` : ''}`;

/** What every group finding is (a filter that tests neither needs no group: report/filter.ts readsGroup). */
export const GROUP_FINDING = { kind: 'group', severity: 'warning' } as const satisfies Partial<Finding>;

function findingsOf(g: GroupState): Finding[] {
  const out: Finding[] = [];
  const base = { ...GROUP_FINDING, turn: -1, index: -1 } as const;
  if (g.size >= 2 && g.rewards === g.size && g.rewardMin === g.rewardMax)
    out.push({
      ...base,
      field: 'reward',
      actual: g.rewardMin,
      message: `all ${g.size} samples of ${where(g)} have reward ${g.rewardMin}: every advantage is zero, the group teaches nothing`,
    });
  if (g.size >= 2 && g.samplesKnown === g.size && !g.samplesDiffer)
    out.push({
      ...base,
      field: 'sample',
      message: `all ${g.size} samples of ${where(g)} are token-identical: the group holds one answer ${g.size} times`,
    });
  if (g.prompts.size > 1)
    out.push({
      ...base,
      field: 'prompt',
      actual: g.prompts.size,
      message: `the samples of ${where(g)} do not share one prompt: ${g.prompts.size >= MAX_PROMPTS ? `${MAX_PROMPTS} or more` : g.prompts.size} different prompts (token ids or images), where GRPO compares answers to the same one`,
    });
  return out;
}

/** Running group checks over a run, fed one member at a time. */
export class GroupChecks {
  private readonly groups = new Map<string, GroupState>();

  /** Add one sample; returns its group's key. */
  add(m: GroupMember): string {
    const key = groupKey(m);
    let g = this.groups.get(key);
    if (!g) {
      g = {
        id: m.group,
        step: m.step ?? null,
        size: 0,
        rewards: 0,
        rewardMean: 0,
        rewardM2: 0,
        rewardMin: Infinity,
        rewardMax: -Infinity,
        prompts: new Set(),
        promptsKnown: 0,
        firstSample: undefined,
        samplesDiffer: false,
        samplesKnown: 0,
      };
      this.groups.set(key, g);
    }
    g.size++;
    if (typeof m.reward === 'number' && Number.isFinite(m.reward)) {
      g.rewards++;
      const d = m.reward - g.rewardMean;
      g.rewardMean += d / g.rewards;
      g.rewardM2 += d * (m.reward - g.rewardMean);
      g.rewardMin = Math.min(g.rewardMin, m.reward);
      g.rewardMax = Math.max(g.rewardMax, m.reward);
    }
    if (m.prompt !== undefined) {
      g.promptsKnown++;
      if (g.prompts.size < MAX_PROMPTS) g.prompts.add(m.prompt);
    }
    if (m.sample !== undefined) {
      g.samplesKnown++;
      if (g.firstSample === undefined) g.firstSample = m.sample;
      else if (m.sample !== g.firstSample) g.samplesDiffer = true;
    }
    return key;
  }

  get size(): number {
    return this.groups.size;
  }

  /** One group's summary and findings (undefined for a key never added). */
  summary(key: string): GroupSummary | undefined {
    const g = this.groups.get(key);
    if (!g) return undefined;
    const findings = findingsOf(g);
    return {
      id: g.id,
      step: g.step,
      size: g.size,
      reward_mean: g.rewards > 0 ? g.rewardMean : null,
      reward_std: g.rewards > 0 ? Math.sqrt(g.rewardM2 / g.rewards) : null,
      degenerate: findings.some((f) => f.field === 'reward' || f.field === 'sample'),
      findings,
    };
  }

  /** Every group, in the order their first sample came. */
  summaries(): GroupSummary[] {
    return [...this.groups.keys()].map((k) => this.summary(k)!);
  }
}
