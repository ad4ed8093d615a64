// Every exported row equals the canonical re-alignment exactly, re-derived here from the source
// trajectory without the code under test (server/analysis/realign.ts): the prompt of turn 0 once;
// each turn's generated ids verbatim with mask 1 and their logprobs; after each turn that is
// followed by something, the EOS-aware observation suffix with mask 0 (`\n` after a generated
// `<|im_end|>` or `<|endoftext|>`, `<|im_end|>\n` after a turn cut by length, then what the engine's next prompt or
// the stored observation holds from its `<|im_start|>`; docs/export-format.md). Field by field:
// tokens, response_length, loss_mask, rollout_log_probs, over the importer fixtures of every
// format, the demo run, and an exported batch read back.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expandPaths, loadFile } from '../server/import/index.ts';
import { TrajectoryKeys } from '../server/model/trajectory-key.ts';
import { exportRun } from '../server/pipeline/export-run.ts';
import { ExportRow, exportRow } from '../server/export/row.ts';
import { analyzeTrajectory } from '../server/pipeline.ts';
import type { Trajectory } from '../server/model/trajectory.ts';
import { writeDemoRun } from '../server/demo/write.ts';
import { loadProfile } from '../server/profiles/profile.ts';
import { jsonlRecords } from './support/jsonl.ts';

const IM_START = 151644;
const EOS = 151645;
const NL = 198;
const ASSISTANT = 77091;
/** `<|endoftext|>`, the secondary EOS: a turn the model ended with it is closed by `\n` alone too. */
const END_OF_TEXT = 151643;

/** The chat-format ids the derivation follows: ChatML's for Qwen, Gemma's turn tokens for Gemma 3. */
interface ChatIds {
  /** The turn opener; the assistant's role token after it, then the newline. */
  open: number;
  assistant: number;
  nl: number;
  /** The end of turn, and the secondary stop a turn may end with instead (then closed by the newline alone). */
  end: number;
  endOfText: number;
}
const QWEN: ChatIds = { open: IM_START, assistant: ASSISTANT, nl: NL, end: EOS, endOfText: END_OF_TEXT };
let GEMMA3: ChatIds;
/** The ids of the row's model: Gemma 3's runs (test/fixtures/gemma3/) are not ChatML. */
const chatIdsOf = (row: ExportRow): ChatIds => (/gemma-3/i.test(row.model) ? GEMMA3 : QWEN);

let dir = '';
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rollscope-exact-'));
  // Looked up by their text in Gemma 3's real tokenizer, not taken from the family's code.
  const tok = loadProfile('gemma3').tokenizer;
  const id = (text: string) => {
    const found = tok.tokenOfText(text);
    if (found === undefined) throw new Error(`${text}: not one Gemma 3 token`);
    return found;
  };
  GEMMA3 = {
    open: id('<start_of_turn>'),
    assistant: id('model'),
    nl: id('\n'),
    end: id('<end_of_turn>'),
    endOfText: id('<eos>'),
  };
}, 300_000);
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const startsWith = (a: readonly number[], b: readonly number[]) => b.every((x, i) => a[i] === x);

interface Derived {
  tokens: number[];
  promptLength: number;
  mask: number[];
  logprobs: (number | null)[] | null;
}

/**
 * The canonical stream of `t`, derived from its turns alone. Where the data holds no ids for a
 * piece (a prompt or an observation rendered from messages), the row's own tokens stand in for
 * that piece only, and must have the shape the template gives it (ending in the assistant header
 * the next generation follows); everything else comes from the source.
 */
function derive(t: Trajectory, row: ExportRow, c: ChatIds): Derived | undefined {
  const first = t.turns[0];
  if (!first) return undefined;
  const header = [c.open, c.assistant, c.nl];
  const endsWithHeader = (xs: readonly number[]) => xs.length >= 3 && startsWith(xs.slice(-3), header);
  let prompt = first.promptIds?.slice();
  if (!prompt) {
    // Rendered: the row's prompt, which must end with the generation prompt.
    prompt = row.tokens.slice(0, row.tokens.length - row.response_length);
    if (!endsWithHeader(prompt)) return undefined;
  }
  const tokens = prompt.slice();
  const mask: number[] = tokens.map(() => 0);
  const hasLogprobs = t.turns.some((u) => u.generatedLogprobs);
  // Raw text (prompt or sample ids, none with <|im_start|>): turns continue by plain concatenation.
  const stored = [t.sample?.tokens ?? [], ...t.turns.map((u) => u.promptIds ?? [])].filter((ids) => ids.length > 0);
  const plain = stored.length > 0 && !stored.some((ids) => ids.includes(c.open));
  const logprobs: (number | null)[] = tokens.map(() => 0);
  for (let k = 0; k < t.turns.length; k++) {
    const turn = t.turns[k]!;
    const gen = turn.generatedIds ?? [];
    gen.forEach((id, i) => {
      tokens.push(id);
      mask.push(1);
      logprobs.push(turn.generatedLogprobs?.[i] ?? 0);
    });
    const next = t.turns[k + 1];
    if (!next && !turn.observationIds && !turn.observationMessages) continue;
    const last = gen[gen.length - 1];
    const boundary = plain ? [] : last === c.end || last === c.endOfText ? [c.nl] : [c.end, c.nl];
    let tail: readonly number[] | undefined;
    if (plain) {
      if (next?.promptIds && startsWith(next.promptIds, tokens)) tail = next.promptIds.slice(tokens.length);
      else if (turn.observationIds) tail = turn.observationIds;
      else return undefined;
    } else if (next?.promptIds && startsWith(next.promptIds, [...tokens, ...boundary]))
      tail = next.promptIds.slice(tokens.length + boundary.length);
    else if (turn.observationIds) {
      const anchor = turn.observationIds.indexOf(c.open);
      if (anchor < 0) return undefined;
      tail = turn.observationIds.slice(anchor);
    } else if (next?.promptIds) {
      // The next prompt re-rendered our history differently: the observation opens at its n-th
      // <|im_start|>, n being how many turns the canonical stream holds so far.
      const n = tokens.filter((x) => x === c.open).length;
      const at = next.promptIds.map((x, i) => (x === c.open ? i : -1)).filter((i) => i >= 0)[n];
      if (at === undefined) return undefined;
      tail = next.promptIds.slice(at);
    } else {
      // Rendered from messages: the row's tokens from after the boundary up to the next turn's
      // generated ids (or the end), opening with <|im_start|> and ending with the assistant header.
      const from = tokens.length + boundary.length;
      if (!startsWith(row.tokens.slice(tokens.length), boundary) || row.tokens[from] !== c.open) return undefined;
      const nextGen = next?.generatedIds ?? [];
      let to = row.tokens.length;
      if (next) {
        to = -1;
        for (let q = from; q + nextGen.length <= row.tokens.length; q++)
          if (startsWith(row.tokens.slice(q), nextGen) && endsWithHeader(row.tokens.slice(from, q))) {
            to = q;
            break;
          }
        if (to < 0) return undefined;
      }
      tail = row.tokens.slice(from, to);
    }
    for (const id of [...boundary, ...tail]) {
      tokens.push(id);
      mask.push(0);
      logprobs.push(0);
    }
  }
  return { tokens, promptLength: prompt.length, mask, logprobs: hasLogprobs ? logprobs : null };
}

/** The run's trajectories by where they were read and their run-level key, as the pipeline names them. */
async function sources(inputs: readonly string[]): Promise<Map<string, Trajectory>> {
  const out = new Map<string, Trajectory>();
  const keys = new TrajectoryKeys();
  for (const f of expandPaths(inputs).files) {
    const loaded = await loadFile(f);
    for (const t of loaded.trajectories)
      out.set(`${path.resolve(f)}\u0000${t.source.line}\u0000${keys.keyOf(t)}`, t as Trajectory);
  }
  return out;
}

/** Each row against its source, field by field; returns the formats that had rows. */
async function verifyBatch(batch: string, inputs: readonly string[]): Promise<Set<string>> {
  const rows = jsonlRecords(batch).map((r) => ExportRow.parse(r));
  const bySource = await sources(inputs);
  const formats = new Set<string>();
  for (const row of rows) {
    const src = bySource.get(`${path.resolve(row.source.file)}\u0000${row.source.line}\u0000${row.id}`);
    expect(src, `${row.id}: its source trajectory`).toBeDefined();
    const d = derive(src!, row, chatIdsOf(row));
    expect(d, `${row.id} (${row.source.format}): derivable from its turns`).toBeDefined();
    const p = row.tokens.length - row.response_length;
    expect(row.tokens, `${row.id} ${row.source.file}: tokens`).toEqual(d!.tokens);
    expect(p, `${row.id}: prompt length`).toBe(d!.promptLength);
    expect(row.response_length, `${row.id}: response_length`).toBe(d!.tokens.length - d!.promptLength);
    expect(row.loss_mask, `${row.id}: loss_mask`).toEqual(d!.mask.slice(p));
    if (d!.logprobs === null) expect(row.rollout_log_probs, `${row.id}: no logprobs`).toBeNull();
    else expect(row.rollout_log_probs, `${row.id}: rollout_log_probs`).toEqual(d!.logprobs.slice(p));
    expect(row.mm_token_type_ids).toHaveLength(row.tokens.length);
    for (const r of row.position_ids) expect(r).toHaveLength(row.tokens.length);
    formats.add(row.source.format);
  }
  return formats;
}

describe('every exported row is the canonical re-alignment, re-derived independently', () => {
  it('the importer fixtures of every format', async () => {
    const r = await exportRun([path.join('test', 'fixtures')], { out: path.join(dir, 'fixtures.jsonl'), workers: 0 });
    const formats = await verifyBatch(r.out, [path.join('test', 'fixtures')]);
    for (const f of ['slime', 'verl', 'areal', 'prime-rl', 'vllm', 'agent-lightning'])
      expect(formats.has(f), `a row from the ${f} fixtures`).toBe(true);
    // The batch read back and exported again: rows of the `export` format, still exact.
    const again = await exportRun([r.out], { out: path.join(dir, 'again.jsonl'), workers: 0 });
    expect(again.manifest.counts.exported).toBe(r.manifest.counts.exported);
    expect(await verifyBatch(again.out, [r.out])).toEqual(new Set(['export']));
  });

  it('the demo run (native and vLLM logs)', async () => {
    const demo = path.join(dir, 'demo');
    await writeDemoRun(demo);
    const r = await exportRun([demo], { out: path.join(dir, 'demo.jsonl'), workers: 0 });
    const formats = await verifyBatch(r.out, [demo]);
    expect(formats.has('native')).toBe(true);
  });

  it('a re-alignment that is not canonical never becomes a row (the re-check and the row contract catch it)', async () => {
    const file = path.join('test', 'fixtures', 'prime-rl', 'training-samples', 'rank_0.bin');
    const loaded = await loadFile(file);
    const t = loaded.trajectories.find((x) => !x.sample?.mmTokenTypeIds)!;
    const clean = await analyzeTrajectory(t as Trajectory, {}, [dir]);
    const opts = {
      images: 'embed' as const,
      positionIds: 'qwen' as const,
      includeWarnings: false,
      roots: [dir],
      outDir: dir,
      imageDir: dir,
    };
    expect((await exportRow(clean, opts)).kind).toBe('row');
    const gen = clean.alignment.turns[0]!.generated;
    const tamper: [string, (a: typeof clean.alignment) => void][] = [
      [
        'a generated token masked 0',
        (a) => {
          a.lossMask[gen[0] + 1] = 0;
        },
      ],
      [
        'an observation token masked 1',
        (a) => {
          a.lossMask[gen[1]] = 1;
        },
      ],
      [
        'a NaN logprob',
        (a) => {
          a.logprobs[gen[0]] = Number.NaN;
        },
      ],
      [
        'a -100 id',
        (a) => {
          a.tokens[gen[0]] = -100;
        },
      ],
      [
        'a mask one long',
        (a) => {
          a.lossMask.push(0);
        },
      ],
    ];
    for (const [name, change] of tamper) {
      const alignment = structuredClone(clean.alignment);
      change(alignment);
      const outcome = await exportRow({ ...clean, alignment }, opts);
      expect(outcome.kind, name).toBe('rejected');
    }
  });
});
