// The findings of one trajectory grouped by the event that caused them, so a page can say the
// root once and fold what follows from it: one re-render failure is seen as a prefix break of the
// next prompt, a re-render mismatch and a stored-sample mismatch, all with one cause; an image
// whose pads are wrong is also a re-render that differs in image pads; tokens the model wrote as
// vision tokens explain every image-pad finding of the trajectory. Pure: findings in, groups out
// (indices into the list given), the order of the list kept inside a group where nothing ranks.
import type { DivergenceCause, Finding, FindingKind } from '../model/finding.ts';

export interface RootCauseGroup {
  /** The finding that names the event (an index into the findings given). */
  root: number;
  /** Findings that follow from it, each with its sentence cut to what the root does not already say. */
  consequences: { index: number; text: string }[];
}

/** Causes that explain every image-pad finding of the trajectory: the tokens, not the image, are wrong. */
const VISION_TEXT_CAUSES: readonly DivergenceCause[] = ['vision_token_generated', 'placeholder_in_text'];

/** Kinds that count an image's pads (a wrong count, a cut image, a dropped one, a re-render differing in pads). */
const IMAGE_PAD_KINDS: readonly FindingKind[] = [
  'image_truncated',
  'image_count',
  'placeholder_count',
  'placeholder_range',
];

/**
 * Which finding of an event names it, lowest first: where the data broke comes before where the
 * break is seen again (a prompt that stops extending the last is the break; the re-render and the
 * stored sample only differ from the canonical stream because of it).
 */
const ROOT_RANK: Readonly<Partial<Record<FindingKind, number>>> = {
  image_truncated: 0,
  image_count: 1,
  placeholder_count: 2,
  placeholder_range: 3,
  prefix_break: 4,
  chain_split: 5,
  sample_mismatch: 6,
  rerender_mismatch: 7,
};
const rank = (f: Finding) => ROOT_RANK[f.kind] ?? 8;

/** The event a finding belongs to (findings of one key are one event). */
function eventOf(f: Finding, visionText: DivergenceCause | undefined): string | undefined {
  if (f.kind === 'group') return undefined;
  if (visionText && (IMAGE_PAD_KINDS.includes(f.kind) || f.cause === 'image_tokens_changed' || f.cause === visionText))
    return `cause:${visionText}`;
  if (f.cause === 'image_tokens_changed') return 'images';
  if (f.cause) return `cause:${f.cause}`;
  if (IMAGE_PAD_KINDS.includes(f.kind)) return 'images';
  return undefined;
}

/**
 * A consequence's sentence without what the root already says: a message is "where: why", and
 * when the why (or its first clauses) is the root's, only the where is left, with what it adds.
 */
export function consequenceText(message: string, root: string): string {
  for (let at = message.indexOf(': '); at >= 0; at = message.indexOf(': ', at + 2)) {
    const rest = message.slice(at + 2);
    // The longest run of whole clauses the root also holds.
    const ends = [rest.length, ...[...rest.matchAll(/; /g)].map((m) => m.index!)].sort((a, b) => b - a);
    const said = ends.find((end) => end >= 12 && root.includes(rest.slice(0, end)));
    if (said === undefined) continue;
    const more = rest.slice(said).replace(/^;\s*/, '').trim();
    return more ? `${message.slice(0, at)}; ${more}` : message.slice(0, at);
  }
  return message;
}

export function rootCauses(findings: readonly Finding[]): RootCauseGroup[] {
  const visionText = findings.find((f) => f.cause && VISION_TEXT_CAUSES.includes(f.cause))?.cause;
  const events = new Map<string, number[]>();
  const groups: number[][] = [];
  findings.forEach((f, i) => {
    const key = eventOf(f, visionText);
    if (key === undefined) {
      groups.push([i]);
      return;
    }
    let members = events.get(key);
    if (!members) {
      members = [];
      events.set(key, members);
      groups.push(members);
    }
    members.push(i);
  });
  const out = groups.map((members): RootCauseGroup => {
    const byRank = [...members].sort((a, b) => {
      const x = findings[a]!;
      const y = findings[b]!;
      // The tokens the model wrote explain the pads they upset: the finding with that cause names the event.
      const own = (f: Finding) => (visionText && f.cause === visionText ? 0 : 1);
      return (
        own(x) - own(y) ||
        (x.severity === 'error' ? 0 : 1) - (y.severity === 'error' ? 0 : 1) ||
        rank(x) - rank(y) ||
        a - b
      );
    });
    const root = byRank[0]!;
    const rootText = findings[root]!.message;
    return {
      root,
      consequences: byRank
        .slice(1)
        .map((index) => ({ index, text: consequenceText(findings[index]!.message, rootText) })),
    };
  });
  // Errors first, group findings last, then in the order the checks list them.
  const at = (g: RootCauseGroup) => findings[g.root]!;
  return out.sort((a, b) => {
    const x = at(a);
    const y = at(b);
    return (
      (x.severity === 'error' ? 0 : 1) - (y.severity === 'error' ? 0 : 1) ||
      (x.kind === 'group' ? 1 : 0) - (y.kind === 'group' ? 1 : 0) ||
      a.root - b.root
    );
  });
}
