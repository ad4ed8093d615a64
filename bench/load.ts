// Figure "load": how fast rollscope opens a run, against the floor of reading and JSON.parse-ing
// every line in the same process, and against DuckDB's read_json_auto counting the same file.
//
// rollscope is measured on the paths it really uses: the streamed import `check` and `export`
// run (import/stream.ts: read lines, parse with the read limits, import, validate), the line
// index alone (byte offsets of every record, no parse: the least a lazy index must do), and
// `loadFile` (whole file in memory; only on runs small enough to hold).
// `node bin/tsx.js bench/load.ts [--quick] [--keep]`
import fs from 'node:fs';
import readline from 'node:readline';
import { DuckDBInstance } from '@duckdb/node-api';
import { loadFile } from '../server/import/index.ts';
import { readLines } from '../server/import/read/lines.ts';
import { importLines, readFileChunks } from '../server/import/stream.ts';
import { benchRun, isMain, round, runStandalone, timeBest, type Figure, type Measure } from './lib.ts';

/** loadFile holds every trajectory: above this it would measure the garbage collector, not the loader. */
const WHOLE_LOAD_MAX_BYTES = 400e6;

export async function floorParse(file: string): Promise<{ lines: number; failed: number }> {
  let lines = 0;
  let failed = 0;
  const rl = readline.createInterface({
    input: fs.createReadStream(file, { highWaterMark: 1 << 20 }),
    crlfDelay: Infinity,
  });
  for await (const line of rl) {
    if (line === '') continue;
    lines++;
    try {
      JSON.parse(line);
    } catch {
      failed++; // Python's bare NaN: JSON.parse refuses it after reading the line, the cost is paid
    }
  }
  return { lines, failed };
}

async function lineIndex(file: string): Promise<number> {
  let n = 0;
  for await (const l of readLines(file)) if (l.length > 0) n++;
  return n;
}

export async function streamedImport(file: string): Promise<{ trajectories: number; errors: number }> {
  let trajectories = 0;
  let errors = 0;
  for await (const chunk of readFileChunks(file)) {
    if (chunk.kind === 'loaded') {
      trajectories += chunk.loaded.trajectories.length;
      errors += chunk.loaded.errors.length;
      continue;
    }
    const r = importLines(chunk.file, chunk.format, chunk.lines);
    trajectories += r.trajectories.length;
    errors += r.errors.length;
  }
  return { trajectories, errors };
}

export async function duckdb(file: string, sql: (f: string) => string): Promise<{ seconds: number; value: string }> {
  const inst = await DuckDBInstance.create(':memory:');
  const con = await inst.connect();
  try {
    const quoted = `'${file.replace(/'/g, "''")}'`;
    let value = '';
    const seconds = await timeBest(2, async () => {
      const r = await con.runAndReadAll(sql(quoted));
      value = String(r.getRows()[0]?.[0]);
    });
    return { seconds, value };
  } finally {
    con.closeSync();
    inst.closeSync();
  }
}

export async function loadFigure(quick: boolean): Promise<Figure> {
  const run = await benchRun(quick ? 'quick' : 'medium');
  const file = run.file;
  const mb = run.bytes / 1e6;
  const n = run.trajectories;
  const reps = quick ? 1 : 2;
  const rate = (name: string, seconds: number, note?: string): Measure[] => [
    { name: `${name}`, value: mb / seconds, unit: 'MB/s', ...(note ? { note } : {}) },
    { name: `${name}`, value: n / seconds, unit: 'trajectories/s' },
  ];

  let floor = { lines: 0, failed: 0 };
  const floorS = await timeBest(reps, async () => (floor = await floorParse(file)));
  let indexed = 0;
  const indexS = await timeBest(reps, async () => (indexed = await lineIndex(file)));
  let streamed = { trajectories: 0, errors: 0 };
  const streamS = await timeBest(reps, async () => (streamed = await streamedImport(file)));
  let whole: number | undefined;
  const wholeS =
    run.bytes <= WHOLE_LOAD_MAX_BYTES
      ? await timeBest(reps, async () => (whole = (await loadFile(file)).trajectories.length))
      : undefined;
  const duckCount = await duckdb(file, (f) => `SELECT count(*) FROM read_json_auto(${f}, format='newline_delimited')`);
  const duckTokens = await duckdb(
    file,
    (f) => `SELECT sum(len(sample.tokens)) FROM read_json_auto(${f}, format='newline_delimited')`,
  );

  if (streamed.trajectories !== n || indexed !== n || floor.lines !== n) {
    throw new Error(
      `load figure: counts disagree (generated ${n}, streamed ${streamed.trajectories}, indexed ${indexed}, floor ${floor.lines})`,
    );
  }
  const ratio = floorS / streamS;
  return {
    figure: 'load',
    title: 'load/index: opening a run',
    status: 'measured',
    data: {
      file: `${run.size} run`,
      MB: round(mb),
      trajectories: n,
      'lines JSON.parse refuses (bare NaN)': floor.failed,
    },
    results: [
      ...rate('streamed import (read, parse with limits, import, validate; what check/export run)', streamS),
      ...rate('line index (byte offsets of every record, no parse)', indexS),
      ...(wholeS !== undefined
        ? rate('loadFile (whole file in memory)', wholeS)
        : [
            {
              name: 'loadFile (whole file in memory)',
              value: null,
              unit: 'MB/s',
              note: `not run above ${WHOLE_LOAD_MAX_BYTES / 1e6} MB`,
            },
          ]),
    ],
    references: [
      ...rate('floor: read lines + JSON.parse, same process', floorS),
      ...rate(`DuckDB read_json_auto count(*) (= ${duckCount.value})`, duckCount.seconds),
      ...rate(`DuckDB read_json_auto sum(len(sample.tokens)) (parses the token arrays)`, duckTokens.seconds),
    ],
    targets: [
      {
        name: 'index speed',
        wanted: 'the index builds at no less than half the speed of the read-and-parse floor (serve)',
        measured: `streamed import at ${round(ratio * 100)}% of the floor; line index at ${round((floorS / indexS) * 100)}% (serve's own index is server/http, not measured here)`,
        met: null,
      },
    ],
    notes: [
      whole !== undefined && whole !== n ? `loadFile read ${whole} of ${n}` : '',
      'DuckDB reads NaN where JSON.parse refuses it; rollscope accepts it too (Python json writes it).',
    ].filter(Boolean),
  };
}

if (isMain(import.meta.url)) await runStandalone(loadFigure);
