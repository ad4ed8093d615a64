// `rollscope compare`: a rollout against a deliberately damaged copy of its own export finds each
// damage at its token and nothing else; the slime rollout dump against its train dumps; the CLI.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { compareReport } from '../server/cli/compare.ts';
import { compareRuns as compareSides } from '../server/pipeline/compare-runs.ts';

/** The two sides compared, as `rollscope compare --json` reports them. */
const compareRuns = async (...args: Parameters<typeof compareSides>) => ({
  report: compareReport(await compareSides(...args)),
});

const ROOT = path.join(import.meta.dirname, '..');
const FIXTURES = path.join(ROOT, 'test', 'fixtures');
const ROLLOUT = [path.join(FIXTURES, 'vllm', 'chat-chained.jsonl'), path.join(FIXTURES, 'vllm', 'chat-by-id.jsonl')];

function cli(args: string[]) {
  return spawnSync(process.execPath, [path.join(ROOT, 'bin', 'rollscope.js'), ...args], {
    encoding: 'utf8',
    cwd: ROOT,
  });
}

interface Row {
  id: string;
  tokens: number[];
  response_length: number;
  loss_mask: number[];
  rollout_log_probs: number[] | null;
  images: unknown[];
  image_grid_thw: unknown[];
}

describe('compare a rollout with what the trainer got', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-compare-'));
  const batch = path.join(dir, 'batch.jsonl');
  const exported = cli(['export', ...ROLLOUT, '--out', batch]);
  const rows: Row[] = fs
    .readFileSync(batch, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));

  it('its own export matches the rollout pair for pair', async () => {
    expect(exported.status, exported.stderr).toBe(0);
    const { report } = await compareRuns(ROLLOUT, [batch], {});
    expect(report.summary.pairs).toBe(rows.length);
    expect(report.summary.differing).toBe(0);
    // Trajectories the export rejected are on the rollout side only.
    expect(report.unmatched.trained).toEqual([]);
    expect(report.unmatched.rollout.length).toBeGreaterThan(0);
  });

  it('finds each damage at its index and nothing else', async () => {
    const damaged = structuredClone(rows);
    const withImages = damaged.filter((r) => r.images.length > 1);
    const [dropImage] = withImages;
    const others = damaged.filter((r) => r !== dropImage && r.rollout_log_probs);
    const [shiftLogprobs, changeToken, changeMask] = others;
    if (!dropImage || !shiftLogprobs || !changeToken || !changeMask)
      throw new Error('the fixture run has too few rows');
    const expected = new Map<string, [string, number][]>();

    // A dropped image: the row keeps its tokens but loses the image and its grid.
    dropImage.images.splice(1, 1);
    dropImage.image_grid_thw.splice(1, 1);
    expected.set(dropImage.id, [['images', -1]]);

    // Logprobs shifted right by one: the first generated token whose value changes is where it shows.
    const lp = shiftLogprobs.rollout_log_probs!;
    const before = [...lp];
    lp.unshift(0);
    lp.pop();
    const prompt = (r: Row) => r.tokens.length - r.response_length;
    const firstChanged = before.findIndex((v, i) => shiftLogprobs.loss_mask[i] === 1 && Math.abs(v - lp[i]!) > 1e-5);
    expected.set(shiftLogprobs.id, [['logprobs', prompt(shiftLogprobs) + firstChanged]]);

    // One generated token replaced by another id.
    const at = prompt(changeToken) + changeToken.loss_mask.indexOf(1) + 2;
    changeToken.tokens[at] = changeToken.tokens[at] === 11 ? 12 : 11;
    expected.set(changeToken.id, [['tokens', at]]);

    // One generated token masked out.
    const maskAt = changeMask.loss_mask.lastIndexOf(1);
    changeMask.loss_mask[maskAt] = 0;
    expected.set(changeMask.id, [['loss_mask', prompt(changeMask) + maskAt]]);

    const damagedFile = path.join(dir, 'damaged.jsonl');
    fs.writeFileSync(damagedFile, `${damaged.map((r) => JSON.stringify(r)).join('\n')}\n`);
    const { report } = await compareRuns(ROLLOUT, [damagedFile], {});
    expect(report.summary.pairs).toBe(rows.length);
    for (const pair of report.pairs) {
      const got = (pair.findings as { kind: string; field: string; index: number }[]).map((f) => {
        expect(f.kind).toBe('trained_mismatch');
        return [f.field, f.index];
      });
      expect([pair.trained.id, got]).toEqual([pair.trained.id, expected.get(pair.trained.id) ?? []]);
    }
  });

  it('a slime rollout dump against its train dumps, in both layouts', async () => {
    for (const train of ['train_data_0.pt', 'train_data_0_0.pt']) {
      const { report } = await compareRuns(
        [path.join(FIXTURES, 'torch', 'rollout_data_0.pt')],
        [path.join(FIXTURES, 'torch', train)],
        {},
      );
      expect(report.summary.pairs).toBe(6);
      const byId = Object.fromEntries(
        report.pairs.map((p) => [p.rollout.id, (p.findings as { field: string }[]).map((f) => f.field)]),
      );
      // The clean samples arrived as generated; the faulty ones were trained as stored, so the
      // trainer saw what the canonical re-alignment would have fixed.
      expect(byId['rollout-0/sample-0']).toEqual([]);
      expect(byId['rollout-0/sample-1']).toEqual([]);
      expect(byId['rollout-0/sample-2']).toEqual(['tokens']);
      expect(byId['rollout-0/sample-4']).toEqual(['loss_mask']);
    }
  });

  it('CLI: exit 1 on a difference, --json with the documented summary, exit 2 without two paths', () => {
    const r = cli([
      'compare',
      path.join(FIXTURES, 'torch', 'rollout_data_0.pt'),
      path.join(FIXTURES, 'torch', 'train_data_0.pt'),
      '--json',
    ]);
    expect(r.status).toBe(1);
    const report = JSON.parse(r.stdout);
    expect(report.summary).toMatchObject({ pairs: 6, unmatchedRollout: 0, unmatchedTrained: 0 });
    expect(cli(['compare', ROLLOUT[0]!]).status).toBe(2);
  });
});
