// The importer harness can fail: its integrity check catches a check that stops reporting what
// does not line up, duplicate ids and findings that point outside their stream; its dump puts one
// fact on each line. Run on a real fixture's real analysis, with one thing taken away at a time.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { FindingKind } from '../server/model/finding.ts';
import { FIXTURES } from './fixtures/generate-trainers.ts';
import { findingLine, importerRun, integrityViolations, type ImporterRun } from './support/importer-harness.ts';

const SAMPLES = path.relative(process.cwd(), path.join(FIXTURES, 'slime', 'samples.jsonl'));
const CHAINED = path.relative(process.cwd(), path.join(FIXTURES, 'vllm', 'chat-chained.jsonl'));

/** The same run with the findings of one kind left out, as if its check had stopped reporting. */
function withoutKind(run: ImporterRun, kind: FindingKind): ImporterRun {
  return {
    ...run,
    checked: run.checked.map((c) => ({ ...c, findings: c.findings.filter((f) => f.kind !== kind) })),
  };
}

describe('integrityViolations', () => {
  it('holds on the fixture as imported and checked', async () => {
    expect(integrityViolations(await importerRun(SAMPLES))).toEqual([]);
  });

  it('reports a loss mask of the wrong length once no length_mismatch finding says so', async () => {
    const run = await importerRun(SAMPLES);
    expect(integrityViolations(withoutKind(run, 'length_mismatch'))).toEqual([
      'sample-4: sample loss mask has 219 entries for 220, and no length_mismatch finding says so',
    ]);
  });

  it('reports a prompt that does not extend the previous turn once no prefix_break finding says so', async () => {
    // The GRPO sibling whose second prompt re-tokenized its first answer.
    const violations = integrityViolations(withoutKind(await importerRun(CHAINED), 'prefix_break'));
    expect(violations).toEqual([
      "line 2: turn 1's prompt does not start with turn 0's prompt and generation, and no prefix_break finding says so",
    ]);
  });

  it('reports pad runs that disagree with image_grid_thw once no placeholder_count finding says so', async () => {
    const violations = integrityViolations(withoutKind(await importerRun(SAMPLES), 'placeholder_count'));
    expect(violations.some((v) => /^sample-3: pad run 0 has \d+ pads, its grid \[.*\] gives \d+, and no/.test(v))).toBe(
      true,
    );
  });

  it('reports duplicate ids and a finding past the end of its stream', async () => {
    const run = await importerRun(SAMPLES);
    const [first, second] = run.loaded.trajectories;
    const duplicated: ImporterRun = {
      ...run,
      loaded: { ...run.loaded, trajectories: [first!, { ...second!, id: first!.id }] },
      checked: [
        run.checked[0]!,
        {
          ...run.checked[1]!,
          trajectory: { ...run.checked[1]!.trajectory, id: first!.id },
          findings: [
            { kind: 'invalid_value', severity: 'error', turn: 0, index: 10_000, stream: 'sample', message: 'x' },
          ],
        },
      ],
    };
    const tokens = second!.sample!.tokens.length;
    expect(integrityViolations(duplicated)).toEqual([
      'id "sample-0" is used by 2 trajectories',
      `sample-0: finding invalid_value (x) points at 10000, past the ${tokens} tokens of its sample stream`,
    ]);
  });
});

describe('the dump', () => {
  it('gives each finding one line: severity, kind/cause, turn, stream@index, image', () => {
    expect(
      findingLine({
        kind: 'prefix_break',
        cause: 'duplicated_eos',
        severity: 'error',
        turn: 1,
        index: 70,
        stream: 'prompt',
        message: '',
      }),
    ).toBe('error prefix_break/duplicated_eos turn 1 prompt@70');
    expect(
      findingLine({ kind: 'placeholder_count', severity: 'warning', turn: -1, index: 15, image: 0, message: '' }),
    ).toBe('warning placeholder_count turn -1 -@15 image 0');
  });
});
