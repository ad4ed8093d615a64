// `rollscope export`: validated training batches from the canonical re-alignment. Real
// trajectories (built with the real tokenizer and templates), real PNGs (sharp), the demo run and
// the importers' fixtures go out as JSONL and Parquet and are verified row by row against the
// canonical re-alignment; DuckDB reads the Parquet; batches load back with no findings; an
// existing batch is never clobbered; a killed export leaves nothing under the final name.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { spawn } from 'node:child_process';
import sharp from 'sharp';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadProfile } from '../server/profiles/profile.ts';
import { checkPaths, analyzeTrajectory, type CheckedTrajectory } from '../server/pipeline.ts';
import { loadFile } from '../server/import/index.ts';
import type { Trajectory } from '../server/model/trajectory.ts';
import { ExportRow } from '../server/export/row.ts';
import { readParquetRows } from '../server/export/parquet.ts';
import { readManifest, RejectEntry, type Manifest } from '../server/export/manifest.ts';
import { ExportError, type ExportOptions } from '../server/export/run.ts';
import { exportRun } from '../server/pipeline/export-run.ts';
import { warningDoubtsRow } from '../server/export/policy.ts';
import type { Finding } from '../server/model/finding.ts';
import { command as exportCommand } from '../server/cli/commands/export.ts';
import { UsageError } from '../server/cli/command.ts';
import { writeDemoRun, DEMO_DESCRIPTION } from '../server/demo/write.ts';
import { buildTrajectory, geometryScript, type Script } from './support/build.ts';
import { waitFor } from './support/wait.ts';

/** A warning the export does not reject for (it describes a correct row). */
const describesRow = (f: Finding) => f.severity === 'warning' && !warningDoubtsRow(f);

const IM_START = 151644;
const EOS = 151645;
const NL = 198;
const VS = 151652;
const VE = 151653;
const PAD = 151655;

const qwen25 = loadProfile('qwen2.5-vl');
const qwen3 = loadProfile('qwen3-vl');

let dir = '';
let input = '';
const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
const fileSha = (f: string) => sha(fs.readFileSync(f));

async function png(width: number, height: number, hue: number): Promise<Buffer> {
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}"><rect width="100%" height="100%" fill="hsl(${hue},40%,92%)"/><polygon points="${width * 0.1},${height * 0.9} ${width * 0.9},${height * 0.9} ${width * 0.1},${height * 0.2}" fill="none" stroke="#222" stroke-width="3"/></svg>`;
  return sharp(Buffer.from(svg)).png().toBuffer();
}

/** Every pad run, found by scanning the tokens (independently of the code under test). */
function padRunsByHand(tokens: readonly number[], pad = PAD): { offset: number; length: number }[] {
  const out: { offset: number; length: number }[] = [];
  for (let i = 0; i < tokens.length; i++) {
    if (tokens[i] !== pad) continue;
    let j = i;
    while (tokens[j] === pad) j++;
    out.push({ offset: i, length: j - i });
    i = j;
  }
  return out;
}

function readJsonl(file: string): unknown[] {
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as unknown);
}

const rowsOf = (file: string) => readJsonl(file).map((r) => ExportRow.parse(r));
const keyOf = (source: { file: string; line: number }, id: string) =>
  `${path.resolve(source.file)}\u0000${source.line}\u0000${id}`;

async function checkedById(paths: string[]): Promise<Map<string, CheckedTrajectory>> {
  const out = new Map<string, CheckedTrajectory>();
  for await (const ev of checkPaths(paths, { workers: 0 }))
    if (ev.type === 'trajectory') out.set(keyOf(ev.checked.trajectory.source, ev.checked.trajectory.id), ev.checked);
  return out;
}

/**
 * Row by row: the tokens are the canonical re-alignment, the mask is 1 exactly on the generated
 * ids (in order) with their logprobs, placeholder ranges are the pad runs, token types mark them,
 * grids match the runs, positions have the layout's shape, images are the bytes of the file.
 */
function verifyRows(rows: ExportRow[], checked: Map<string, CheckedTrajectory>, positionRows = 3): void {
  expect(rows.length).toBeGreaterThan(0);
  for (const row of rows) {
    const c = checked.get(keyOf(row.source, row.id));
    expect(c, `row ${row.id} has a checked trajectory`).toBeDefined();
    const a = c!.alignment;
    // The row's own model family (the fixtures hold Gemma 3 runs too): its end of turn, image span
    // tokens, merge and position layout.
    const { ids, vision, modelFamily } = c!.profile;
    const EOT = ids.grammar.endOfTurn ?? ids.eos;
    const [PAD_ID, BEGIN, END] = [ids.media.image.pad, ids.media.image.begin, ids.media.image.end];
    const rowsOfPositions = modelFamily.trainerFields.positionIds === 'plain' ? 1 : positionRows;
    expect(row.tokens).toEqual(a.tokens);
    const p = row.tokens.length - row.response_length;
    expect(p).toBe(a.promptLength);
    expect(row.loss_mask).toHaveLength(row.response_length);
    const generated = c!.trajectory.turns.flatMap((t) => t.generatedIds ?? []);
    expect(row.tokens.slice(p).filter((_, i) => row.loss_mask[i] === 1)).toEqual(generated);
    if (row.rollout_log_probs) {
      expect(row.rollout_log_probs).toHaveLength(row.response_length);
      expect(row.rollout_log_probs.filter((_, i) => row.loss_mask[i] === 1)).toEqual(
        c!.trajectory.turns.flatMap((t) => t.generatedLogprobs ?? []),
      );
      expect(row.rollout_log_probs.filter((_, i) => row.loss_mask[i] === 0).every((x) => x === 0)).toBe(true);
    }
    expect(row.tokens.findIndex((x, i) => x === EOT && row.tokens[i - 1] === EOT)).toBe(-1);
    for (const img of row.images)
      if (img.bytes !== null) expect(sha(Buffer.from(img.bytes, 'base64'))).toBe(img.sha256);

    const runs = padRunsByHand(row.tokens, PAD_ID);
    expect(row.placeholder_ranges).toEqual(runs);
    expect(row.images).toHaveLength(runs.length);
    expect(row.image_grid_thw).toHaveLength(runs.length);
    runs.forEach((r, i) => {
      expect(row.tokens[r.offset - 1]).toBe(BEGIN);
      expect(row.tokens[r.offset + r.length]).toBe(END);
      const [t, h, w] = row.image_grid_thw[i]!;
      expect((t * h * w) / vision.mergeSize ** 2).toBe(r.length);
    });
    const inRun = new Set(runs.flatMap((r) => Array.from({ length: r.length }, (_, k) => r.offset + k)));
    expect(row.mm_token_type_ids).toEqual(row.tokens.map((_, i) => (inRun.has(i) ? 1 : 0)));
    expect(row.position_ids).toHaveLength(rowsOfPositions);
    for (const r of row.position_ids) expect(r).toHaveLength(row.tokens.length);
    if (runs.length === 0) for (const r of row.position_ids.slice(-3)) expect(r).toEqual(row.tokens.map((_, i) => i)); // docs/reference/mrope.md: text → 0..L−1
  }
}

function imageBytesOf(row: ExportRow, i: number, batchDir: string): Buffer {
  const img = row.images[i]!;
  return img.bytes !== null ? Buffer.from(img.bytes, 'base64') : fs.readFileSync(path.join(batchDir, img.path!));
}

const exportTo = (name: string, extra: Partial<ExportOptions> = {}) =>
  exportRun([input], { out: path.join(dir, name), workers: 0, ...extra });

// --- the built run --------------------------------------------------------------------------------

const WORKED_IDS = { user: 0, assistant: 0, hi: 0 };

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-export-'));
  fs.writeFileSync(path.join(dir, 'diagram.png'), await png(640, 480, 200));
  fs.writeFileSync(path.join(dir, 'big.png'), await png(1920, 1080, 30));
  // 84×56 on Qwen2.5-VL defaults resizes to 56×84: grid [1, 4, 6], 6 pads (docs/reference/mrope.md#worked-example).
  fs.writeFileSync(path.join(dir, 'tiny.png'), await png(84, 56, 120));
  const qwen3Png = await png(640, 480, 300);

  const withImage = (t: Trajectory, url: string) => ({ ...t, images: [{ url }] });
  const clean = await buildTrajectory(qwen25, geometryScript('clean'), 'canonical');
  const dupEos = await buildTrajectory(qwen25, geometryScript('dup-eos'), 'legacy');
  const truncatedScript = geometryScript('truncated');
  truncatedScript.turns[0]!.truncated = true;
  const truncated = await buildTrajectory(qwen25, truncatedScript, 'canonical');
  const textOnly: Script = {
    id: 'text-only',
    messages: [{ role: 'user', content: 'What is 2 + 2?' }],
    turns: [{ answer: '2 + 2 = 4.', observation: [{ role: 'user', content: 'Are you sure?' }] }, { answer: 'Yes: 4.' }],
  };
  const text = await buildTrajectory(qwen25, textOnly, 'canonical');
  const q3 = await buildTrajectory(qwen3, geometryScript('qwen3'), 'canonical');
  const wrongPads = await buildTrajectory(qwen25, geometryScript('wrong-pads'), 'canonical');
  const badLogprob = await buildTrajectory(qwen25, geometryScript('bad-logprob'), 'canonical');
  badLogprob.turns[0]!.generatedLogprobs![2] = 0.5;
  const warnScript = geometryScript('warn');
  warnScript.turns[0]!.split = { word: ' will', pieces: [' w', 'ill'] };
  const warn = await buildTrajectory(qwen25, warnScript, 'canonical');

  const enc1 = async (s: string) => {
    const ids = await qwen25.tokenizer.encode(s);
    expect(ids).toHaveLength(1);
    return ids[0]!;
  };
  WORKED_IDS.user = await enc1('user');
  WORKED_IDS.assistant = await enc1('assistant');
  WORKED_IDS.hi = await enc1('Hi');
  const worked = {
    id: 'worked',
    turns: [
      {
        promptIds: [
          IM_START,
          WORKED_IDS.user,
          NL,
          VS,
          ...new Array<number>(6).fill(PAD),
          VE,
          EOS,
          NL,
          IM_START,
          WORKED_IDS.assistant,
          NL,
        ],
        generatedIds: [WORKED_IDS.hi, EOS],
        generatedLogprobs: [-0.5, -0.25],
        finishReason: 'stop',
      },
    ],
    images: [{ url: 'tiny.png' }],
  };

  const lines = [
    withImage(clean, 'diagram.png'),
    withImage(dupEos, 'diagram.png'),
    withImage(truncated, 'diagram.png'),
    text,
    { ...withImage(q3, `data:image/png;base64,${qwen3Png.toString('base64')}`), model: 'Qwen/Qwen3-VL-8B-Instruct' },
    withImage(wrongPads, 'big.png'),
    withImage(badLogprob, 'diagram.png'),
    withImage(warn, 'diagram.png'),
    worked,
  ].map((t) => JSON.stringify(t));
  lines.splice(8, 0, '{"id": "broken", "turns": "not a list"}');
  input = path.join(dir, 'run.rollscope.jsonl');
  fs.writeFileSync(input, `${lines.join('\n')}\n`);
});

afterAll(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

describe('export of built trajectories', () => {
  let jsonl: { manifest: Manifest; rows: ExportRow[] };
  let checked: Map<string, CheckedTrajectory>;
  beforeAll(async () => {
    checked = await checkedById([input]);
    const r = await exportTo('batch.jsonl');
    jsonl = { manifest: r.manifest, rows: rowsOf(r.out) };
  });

  it('exports the clean, the repairable and the described, rejects the rest, and the counts add up', async () => {
    // warn: a non-canonical split, a warning that describes a correct row (its ids kept verbatim).
    expect(jsonl.rows.map((r) => r.id)).toEqual([
      'clean',
      'dup-eos',
      'truncated',
      'text-only',
      'qwen3',
      'warn',
      'worked',
    ]);
    const m = readManifest(path.join(dir, 'batch.jsonl.manifest.json'));
    expect(m).toEqual(jsonl.manifest);
    const rejects = readJsonl(path.join(dir, 'batch.jsonl.rejects.jsonl')).map((r) => RejectEntry.parse(r));
    expect(rejects.map((r) => r.id)).toEqual(['wrong-pads', 'bad-logprob', null]); // in the order the file has them (the unreadable record is line 9)
    expect(m.counts.read).toBe(10); // 10 lines in the input, each one trajectory or one unreadable record
    expect(m.counts.read).toBe(m.counts.exported + m.counts.rejected);
    expect(m.counts.exported).toBe(jsonl.rows.length);
    expect(m.counts.rejected).toBe(rejects.length);
    expect(m.output.rows).toBe(jsonl.rows.length);
    expect(m.rejects.lines).toBe(rejects.length);
    expect(m.counts.unreadable).toBe(1);
    // wrong-pads: its pad run fits no grid (grid_unknown), and re-rendering it with 2691 pads diverges
    // (a warning about image pads: it doubts the row).
    expect(Object.entries(m.counts.byReason).filter(([, n]) => n > 0)).toEqual([
      ['unfixable_finding', 2],
      ['warning', 1],
      ['grid_unknown', 1],
      ['unreadable', 1],
    ]);
    expect(m.counts.byFindingKind).toMatchObject({
      placeholder_count: 1,
      invalid_value: 1,
      rerender_mismatch: 1,
      prefix_break: 0,
    });
    expect(m.counts.repairedByFindingKind).toMatchObject({ prefix_break: 1, rerender_mismatch: 1 });
    // The warnings exported rows carry (the split, and the re-render it would change).
    expect(Object.entries(m.counts.exportedWithWarnings).filter(([, n]) => n > 0)).toEqual([
      ['rerender_mismatch', 1],
      ['non_canonical_split', 1],
    ]);

    const wrong = rejects[0]!;
    expect(wrong.reasons).toEqual(['unfixable_finding', 'warning', 'grid_unknown']);
    // 1920×1080 on Qwen2.5-VL defaults: 2691 pads (docs/reference/image-math.md); the stream holds 640×480's 391.
    expect(wrong.findings).toContainEqual(
      expect.objectContaining({ kind: 'placeholder_count', expected: 2691, actual: 391 }),
    );
    expect(rejects[1]!.findings).toContainEqual(expect.objectContaining({ kind: 'invalid_value', actual: 0.5 }));
    expect(rejects[2]).toMatchObject({ source: { line: 9 }, reasons: ['unreadable'] });

    expect(m.inputs).toEqual([
      { file: input, format: 'native', bytes: fs.statSync(input).size, sha256: fileSha(input), trajectories: 9 },
    ]);
    expect(m.output.sha256).toBe(fileSha(path.join(dir, 'batch.jsonl')));
    expect(m.profiles).toEqual([
      { name: 'qwen2.5-vl', family: 'qwen2.5-vl', hashes: qwen25.hashes, trajectories: 8 },
      { name: 'qwen3-vl', family: 'qwen3-vl', hashes: qwen3.hashes, trajectories: 1 },
    ]);
    expect(m.settings).toMatchObject({
      format: 'jsonl',
      images: 'embed',
      position_ids: 'qwen',
      include_warnings: false,
    });
  });

  it('rows are the canonical re-alignment: tokens, masks, logprobs, placeholder ranges, token types', () => {
    verifyRows(jsonl.rows, checked);
    const byId = new Map(jsonl.rows.map((r) => [r.id, r]));
    // The legacy re-render duplicated <|im_end|>; re-aligned, it is the cleanly built stream.
    expect(byId.get('dup-eos')!.tokens).toEqual(byId.get('clean')!.tokens);
    const dup = checked.get(keyOf({ file: input, line: 2 }, 'dup-eos'))!;
    expect(dup.findings.some((f) => f.kind === 'prefix_break' && f.cause === 'duplicated_eos')).toBe(true);
    // A turn cut by length gets the template's `<|im_end|>\n` as untrained boundary.
    const tr = byId.get('truncated')!;
    const p = tr.tokens.length - tr.response_length;
    const firstZero = tr.loss_mask.indexOf(0);
    expect(tr.tokens[p + firstZero - 1]).not.toBe(EOS);
    expect(tr.tokens.slice(p + firstZero, p + firstZero + 3)).toEqual([EOS, NL, IM_START]);
    expect(tr.status).toBe('completed');
    // docs/reference/image-math.md: 640×480 → [1, 34, 46] / 391 pads (Qwen2.5-VL), [1, 30, 40] / 300 (Qwen3-VL).
    expect(byId.get('clean')!.image_grid_thw).toEqual([[1, 34, 46]]);
    expect(byId.get('clean')!.placeholder_ranges[0]!.length).toBe(391);
    expect(byId.get('qwen3')!.image_grid_thw).toEqual([[1, 30, 40]]);
    expect(byId.get('qwen3')!.placeholder_ranges[0]!.length).toBe(300);
    expect(byId.get('qwen3')!.model).toBe('Qwen/Qwen3-VL-8B-Instruct');
    expect(byId.get('text-only')!.images).toEqual([]);
    const img = byId.get('clean')!.images[0]!;
    expect(Buffer.from(img.bytes!, 'base64').equals(fs.readFileSync(path.join(dir, 'diagram.png')))).toBe(true);
    expect(img).toMatchObject({
      sha256: fileSha(path.join(dir, 'diagram.png')),
      width: 640,
      height: 480,
      min_pixels: 3136,
      max_pixels: 12845056,
      path: null,
    });
  });

  it('position_ids follow the mrope.md worked example, and verl layout adds the text row', async () => {
    const worked = jsonl.rows.find((r) => r.id === 'worked')!;
    // Indices 0–10: docs/reference/mrope.md's table (<|im_start|> user \n <|vision_start|>, 2×3 pads, <|vision_end|>);
    // the rest of this sequence (<|im_end|> \n <|im_start|> assistant \n Hi <|im_end|>) continues as text from 8.
    const t = [0, 1, 2, 3, 4, 4, 4, 4, 4, 4, 7, 8, 9, 10, 11, 12, 13, 14];
    const h = [0, 1, 2, 3, 4, 4, 4, 5, 5, 5, 7, 8, 9, 10, 11, 12, 13, 14];
    const w = [0, 1, 2, 3, 4, 5, 6, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14];
    expect(worked.tokens).toHaveLength(18);
    expect(worked.image_grid_thw).toEqual([[1, 4, 6]]);
    expect(worked.placeholder_ranges).toEqual([{ offset: 4, length: 6 }]);
    expect(worked.position_ids).toEqual([t, h, w]);
    expect(worked.response_length).toBe(2);
    expect(worked.loss_mask).toEqual([1, 1]);
    expect(worked.rollout_log_probs).toEqual([-0.5, -0.25]);

    const verl = await exportTo('batch-verl.jsonl', { positionIds: 'verl' });
    const rows = rowsOf(verl.out);
    verifyRows(rows, checked, 4);
    const v = rows.find((r) => r.id === 'worked')!;
    expect(v.position_ids).toEqual([Array.from({ length: 18 }, (_, i) => i), t, h, w]);
    expect(verl.manifest.settings.position_ids).toBe('verl');
  });

  it('Parquet holds the same rows with typed columns; DuckDB reads INTEGER[], TINYINT[], FLOAT[] and the same token sum', async () => {
    const r = await exportTo('batch.parquet');
    expect(r.manifest.settings.format).toBe('parquet');
    expect(r.manifest.counts).toEqual(jsonl.manifest.counts);
    const bytes = fs.readFileSync(r.out);
    expect(bytes.subarray(0, 4).toString('latin1')).toBe('PAR1');
    const pq = (await readParquetRows(bytes)).map((x) => ExportRow.parse(x));
    expect(pq).toHaveLength(jsonl.rows.length);
    pq.forEach((row, i) => {
      const j = jsonl.rows[i]!;
      // float32 in Parquet: the same numbers, rounded to single precision.
      expect(row).toEqual({ ...j, rollout_log_probs: j.rollout_log_probs?.map((x) => Math.fround(x)) ?? null });
    });

    const db = await DuckDBInstance.create(':memory:');
    const con = await db.connect();
    try {
      const types = Object.fromEntries(
        (await con.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet('${r.out}')`))
          .getRowObjectsJson()
          .map((o) => [String(o.column_name), String(o.column_type)]),
      );
      expect(types).toMatchObject({
        tokens: 'INTEGER[]',
        loss_mask: 'TINYINT[]',
        rollout_log_probs: 'FLOAT[]',
        mm_token_type_ids: 'TINYINT[]',
        response_length: 'INTEGER',
        image_grid_thw: 'INTEGER[][]',
        position_ids: 'INTEGER[][]',
        reward: 'DOUBLE',
        id: 'VARCHAR',
      });
      expect(types.images).toMatch(
        /^STRUCT\(sha256 VARCHAR, width INTEGER, height INTEGER, min_pixels INTEGER, max_pixels INTEGER, bytes BLOB, path VARCHAR, uri VARCHAR\)\[\]$/,
      );
      const jsSum = jsonl.rows.reduce((s, row) => s + row.tokens.reduce((a, b) => a + BigInt(b), 0n), 0n);
      const fromParquet = (
        await con.runAndReadAll(
          `SELECT sum(list_sum(tokens))::BIGINT AS s, count(*) AS n FROM read_parquet('${r.out}')`,
        )
      ).getRowObjectsJson()[0]!;
      expect(String(fromParquet.s)).toBe(String(jsSum));
      expect(String(fromParquet.n)).toBe(String(jsonl.rows.length));
      const fromJsonl = (
        await con.runAndReadAll(
          `SELECT sum(list_sum(tokens))::BIGINT AS s FROM read_json_auto('${path.join(dir, 'batch.jsonl')}')`,
        )
      ).getRowObjectsJson()[0]!;
      expect(String(fromJsonl.s)).toBe(String(jsSum));
      const lens = (
        await con.runAndReadAll(
          `SELECT count(*) AS bad FROM read_parquet('${r.out}') WHERE len(loss_mask) <> response_length OR len(rollout_log_probs) <> response_length OR len(mm_token_type_ids) <> len(tokens)`,
        )
      ).getRowObjectsJson()[0]!;
      expect(String(lens.bad)).toBe('0');
    } finally {
      con.closeSync();
    }
  });

  it('round trip: the JSONL and Parquet batches load back as export rows, with no finding but the warnings that describe them', async () => {
    for (const name of ['batch.jsonl', 'batch.parquet']) {
      const file = path.join(dir, name);
      const loaded = await loadFile(file);
      expect(loaded.errors).toEqual([]);
      expect(loaded.format).toBe('export');
      expect(loaded.trajectories.map((t) => t.id)).toEqual(jsonl.rows.map((r) => r.id));
      for (const [i, t] of loaded.trajectories.entries()) {
        const c = await analyzeTrajectory(t, {}, [dir]);
        expect(
          c.findings.map((f) => f.kind),
          `${name} ${t.id}`,
        ).toEqual(t.id === 'warn' ? ['non_canonical_split'] : []);
        expect(c.alignment.tokens).toEqual(jsonl.rows[i]!.tokens);
        expect(c.profile.family).toBe(t.id === 'qwen3' ? 'qwen3-vl' : 'qwen2.5-vl');
        expect(c.trajectory.images.every((img) => img.unavailable === undefined && img.sizeFrom === 'bytes')).toBe(
          true,
        );
      }
    }
  });

  it('--images path writes paths relative to the batch (data: URLs into FILE.images/), and they load back', async () => {
    const r = await exportTo('paths.jsonl', { images: 'path' });
    const rows = rowsOf(r.out);
    verifyRows(rows, checked);
    const byId = new Map(rows.map((x) => [x.id, x]));
    expect(byId.get('clean')!.images[0]).toMatchObject({ path: 'diagram.png', bytes: null });
    const q3 = byId.get('qwen3')!.images[0]!;
    expect(q3.path).toBe(`paths.jsonl.images/${q3.sha256}.png`);
    expect(fileSha(path.join(dir, q3.path!))).toBe(q3.sha256);
    for (const row of rows) row.images.forEach((img, i) => expect(sha(imageBytesOf(row, i, dir))).toBe(img.sha256));
    const loaded = await loadFile(r.out);
    for (const t of loaded.trajectories)
      expect((await analyzeTrajectory(t, {}, [dir])).findings.filter((f) => !describesRow(f))).toEqual([]);
  });

  it('a non-canonical split exports by default, kept verbatim; --include-warnings adds what the warnings doubt', async () => {
    const rows = jsonl.rows;
    expect(rows.map((x) => x.id)).toContain('warn');
    const r = await exportTo('warnings.jsonl', { includeWarnings: true });
    verifyRows(rowsOf(r.out), checked);
    // The only trajectory whose warnings doubt it also has errors: nothing more to include here.
    expect(r.manifest.counts).toMatchObject({ read: 10, exported: 7, rejected: 3 });
    const warn = rows.find((x) => x.id === 'warn')!;
    const split = [...(await qwen25.tokenizer.encode(' w')), ...(await qwen25.tokenizer.encode('ill'))];
    const at = warn.tokens.findIndex((_, i) => warn.tokens.slice(i, i + split.length).every((x, k) => x === split[k]));
    expect(at).toBeGreaterThan(warn.tokens.length - warn.response_length);
  });

  it('a selection exports only what it accepts and the manifest counts the selection', async () => {
    const r = await exportTo('selected.jsonl', { select: (c) => c.findings.length === 0, selection: 'findings: none' });
    const clean = [...checked.values()].filter((c) => c.findings.length === 0).map((c) => c.trajectory.id);
    expect(r.manifest.counts).toMatchObject({ read: clean.length, exported: clean.length, rejected: 0, unreadable: 0 });
    expect(rowsOf(r.out).map((x) => x.id)).toEqual(clean);
    expect(r.manifest.settings.selection).toBe('findings: none');
  });

  it('never overwrites without force; --force replaces; the CLI says so with exit 2', async () => {
    const out = path.join(dir, 'batch.jsonl');
    const before = fileSha(out);
    await expect(exportTo('batch.jsonl')).rejects.toMatchObject({ code: 'target_exists' });
    await expect(exportTo('batch.jsonl')).rejects.toBeInstanceOf(ExportError);
    expect(fileSha(out)).toBe(before);
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const stdout = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      expect(await exportCommand.run([input, '--out', out, '--workers', '0'])).toBe(2);
      expect(stderr.mock.calls.map((c) => String(c[0])).join('')).toContain('--force');
      await expect(exportCommand.run([input])).rejects.toBeInstanceOf(UsageError);
      await expect(
        exportCommand.run([input, '--out', path.join(dir, 'x.jsonl'), '--images', 'inline']),
      ).rejects.toBeInstanceOf(UsageError);
      await expect(
        exportCommand.run([input, '--out', path.join(dir, 'x.jsonl'), '--format', 'parquet']),
      ).rejects.toBeInstanceOf(UsageError);
      await expect(
        exportCommand.run([path.join(dir, 'missing.jsonl'), '--out', path.join(dir, 'x.jsonl')]),
      ).rejects.toBeInstanceOf(UsageError);
      expect(await exportCommand.run([input, '--out', out, '--force', '--workers', '0'])).toBe(0);
    } finally {
      stderr.mockRestore();
      stdout.mockRestore();
    }
    expect(readManifest(`${out}.manifest.json`).output.sha256).toBe(fileSha(out));
    expect(fs.existsSync(path.join(dir, 'x.jsonl'))).toBe(false);
  });

  it('a batch written into the folder it came from is not read back as input by a --force rerun', async () => {
    const self = path.join(dir, 'self');
    fs.mkdirSync(self);
    for (const f of ['run.rollscope.jsonl', 'diagram.png', 'big.png', 'tiny.png'])
      fs.copyFileSync(path.join(dir, f), path.join(self, f));
    const first = await exportRun([self], { out: path.join(self, 'b.jsonl'), workers: 0 });
    const again = await exportRun([self], { out: path.join(self, 'b.jsonl'), workers: 0, force: true });
    expect(again.manifest.counts).toEqual(first.manifest.counts);
    expect(again.manifest.inputs.map((i) => path.basename(i.file))).toEqual(['run.rollscope.jsonl']);
  });

  it('an aborted export leaves no file under the final name and no temporary file', async () => {
    const controller = new AbortController();
    const p = exportTo('aborted.jsonl', { signal: controller.signal });
    controller.abort();
    await expect(p).rejects.toMatchObject({ code: 'aborted' });
    expect(fs.readdirSync(dir).filter((f) => f.includes('aborted'))).toEqual([]);
  });
});

// --- the demo run and the importers' fixtures -------------------------------------------------------

describe('export of the demo run and the importer fixtures', () => {
  it('the demo run: clean trajectories exported, unfixable ones rejected, rows canonical, both formats round-trip', async () => {
    const demoDir = path.join(dir, 'demo');
    await writeDemoRun(demoDir);
    const checked = await checkedById([demoDir]);
    const outDir = path.join(dir, 'demo-out');
    fs.mkdirSync(outDir);
    for (const out of ['demo.jsonl', 'demo.parquet']) {
      const r = await exportRun([demoDir], { out: path.join(outDir, out), workers: 0 });
      const rows = out.endsWith('.parquet')
        ? (await readParquetRows(fs.readFileSync(r.out))).map((x) => ExportRow.parse(x))
        : rowsOf(r.out);
      verifyRows(
        rows.map((x) => ({ ...x, rollout_log_probs: null })), // float32 in Parquet: logprobs compared in the JSONL pass
        checked,
      );
      if (out.endsWith('.jsonl')) verifyRows(rows, checked);
      const m = r.manifest;
      expect(m.counts.read).toBe(checked.size);
      expect(m.counts.read).toBe(m.counts.exported + m.counts.rejected);
      const exported = new Set(rows.map((x) => x.id));
      for (const [id, description] of Object.entries(DEMO_DESCRIPTION))
        if (description === 'clean') expect(exported.has(id), id).toBe(true);
      for (const tag of ['pads-max-pixels', 'image-truncated', 'image-dropped', 'nan-logprob']) {
        for (const id of Object.keys(DEMO_DESCRIPTION).filter((x) => x.includes(tag)))
          expect(exported.has(id), id).toBe(false);
      }
      const loaded = await loadFile(r.out);
      expect(loaded.format).toBe('export');
      for (const t of loaded.trajectories)
        expect(
          (await analyzeTrajectory(t, {}, [outDir])).findings.filter((f) => !describesRow(f)),
          t.id,
        ).toEqual([]);
    }
  });

  it('the importer fixtures: every row canonical, read = exported + rejected, both formats round-trip', async () => {
    const fixtures = path.join('test', 'fixtures');
    const checked = await checkedById([fixtures]);
    for (const out of ['fixtures.jsonl', 'fixtures.parquet']) {
      const r = await exportRun([fixtures], { out: path.join(dir, out), workers: 0 });
      const m = r.manifest;
      expect(m.counts.read).toBe(m.counts.exported + m.counts.rejected);
      expect(m.counts.read - m.counts.unreadable).toBe(checked.size);
      expect(m.inputs.reduce((n, i) => n + i.trajectories, 0)).toBe(checked.size);
      const rejects = readJsonl(r.rejectsFile).map((x) => RejectEntry.parse(x));
      expect(rejects).toHaveLength(m.counts.rejected);
      const rows = out.endsWith('.parquet')
        ? (await readParquetRows(fs.readFileSync(r.out))).map((x) => ExportRow.parse(x))
        : rowsOf(r.out);
      expect(rows).toHaveLength(m.counts.exported);
      verifyRows(out.endsWith('.parquet') ? rows.map((x) => ({ ...x, rollout_log_probs: null })) : rows, checked);
      const loaded = await loadFile(r.out);
      expect(loaded.errors).toEqual([]);
      for (const t of loaded.trajectories)
        expect(
          (await analyzeTrajectory(t, {}, [dir])).findings.filter((f) => !describesRow(f)),
          t.id,
        ).toEqual([]);
    }
  });
});

// --- killed midway ---------------------------------------------------------------------------------

describe('an export killed midway', () => {
  let big = '';
  let bigSha = '';
  beforeAll(() => {
    // Many copies of one real trajectory: the export takes long enough to be interrupted mid-write.
    const line = readJsonl(input)[0] as { id: string };
    const copies = Array.from({ length: 3000 }, (_, i) => JSON.stringify({ ...line, id: `copy-${i}` }));
    big = path.join(dir, 'big.rollscope.jsonl');
    fs.writeFileSync(big, `${copies.join('\n')}\n`);
    bigSha = fileSha(big);
  });

  const TEMP = (name: string) => new RegExp(`^\\.${name.replace('.', '\\.')}\\.\\d+\\.[0-9a-f]{8}\\.tmp$`);

  /** Start `rollscope export`, wait until its temporary batch holds rows, send `signal`, wait for the end. */
  async function interrupt(
    name: string,
    signal: NodeJS.Signals,
  ): Promise<{ code: number | null; signal: NodeJS.Signals | null; tempSeen: string }> {
    const outDir = fs.mkdtempSync(path.join(dir, 'kill-'));
    const child = spawn(
      process.execPath,
      ['bin/rollscope.js', 'export', big, '--out', path.join(outDir, name), '--workers', '0'],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.on('exit', (code, sig) => resolve({ code, signal: sig })),
    );
    const tempSeen = await waitFor(
      'the export to write its temporary file',
      () => {
        const temp = fs.readdirSync(outDir).find((f) => TEMP(name).test(f));
        if (temp && fs.statSync(path.join(outDir, temp)).size > 0) return temp;
        if (child.exitCode !== null) throw new Error(`export ended before it could be interrupted: ${stderr}`);
        return undefined;
      },
      { everyMs: 5 },
    );
    child.kill(signal);
    const end = await ended;
    return { ...end, tempSeen: path.join(outDir, tempSeen) };
  }

  it('SIGKILL: nothing under the final name, only a clearly temporary file; the input untouched', async () => {
    const { signal, tempSeen } = await interrupt('batch.jsonl', 'SIGKILL');
    expect(signal).toBe('SIGKILL');
    const left = fs.readdirSync(path.dirname(tempSeen));
    expect(left).not.toContain('batch.jsonl');
    expect(left).not.toContain('batch.jsonl.manifest.json');
    expect(left).not.toContain('batch.jsonl.rejects.jsonl');
    expect(left.every((f) => f.startsWith('.') && f.endsWith('.tmp'))).toBe(true);
    expect(left).toContain(path.basename(tempSeen));
    expect(fileSha(big)).toBe(bigSha);
  });

  it('SIGTERM: the temporary files are removed before the process ends; the input untouched', async () => {
    const { signal, tempSeen } = await interrupt('batch.parquet', 'SIGTERM');
    expect(signal).toBe('SIGTERM');
    expect(fs.readdirSync(path.dirname(tempSeen))).toEqual([]);
    expect(fileSha(big)).toBe(bigSha);
  });
});
