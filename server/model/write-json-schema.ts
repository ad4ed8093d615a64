// Writes docs/trajectory.schema.json from the zod model, so the documented native format can
// never drift from the code (a test compares the committed file with a fresh rendering).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { Source, Trajectory } from './trajectory.ts';

export function trajectoryJsonSchema(): string {
  // `source` is where rollscope read the record; a file may omit it (it is replaced on import).
  const schema = z.toJSONSchema(Trajectory.extend({ source: Source.optional() }), {
    io: 'input',
    unrepresentable: 'any',
  });
  return `${JSON.stringify({ title: 'rollscope trajectory (native format, one per JSONL line)', ...schema }, null, 2)}\n`;
}

const isMain = process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (isMain) {
  const out = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../docs/trajectory.schema.json');
  fs.writeFileSync(out, trajectoryJsonSchema());
  console.log(`wrote ${path.relative(process.cwd(), out)}`);
}
