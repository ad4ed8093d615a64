// `rollscope demo --out DIR [--force]`: writes the demo run (Geo3K-like geometry rollouts, some
// clean, some with each failure the checks know) so `rollscope check DIR` / `serve DIR` have
// something real to show. Refuses a non-empty DIR unless --force, so nothing is overwritten by accident.
import fs from 'node:fs';
import path from 'node:path';
import { parse, UsageError, type Command } from '../command.ts';
import { DEMO_DESCRIPTION, writeDemoRun } from '../../demo/write.ts';

export const command: Command = {
  name: 'demo',
  summary: 'write the demo run (geometry rollouts, clean and broken) to a folder',
  usage: `rollscope demo --out DIR [--force]

Writes demo.rollscope.jsonl (rollscope's native format) and the diagrams it refers to (images/*.png)
into DIR, created if missing. The same bytes on every run.

  --out DIR   folder to write into
  --force     write into DIR even if it is not empty (files of the same name are replaced)`,
  async run(argv) {
    const { values, positionals } = parse(argv, {
      out: { type: 'string' },
      force: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    });
    if (positionals.length > 0)
      throw new UsageError(`unexpected argument "${positionals[0]}"; give the folder with --out DIR`);
    const out = values.out;
    if (!out) throw new UsageError('demo needs --out DIR');
    if (fs.existsSync(out)) {
      if (!fs.statSync(out).isDirectory()) throw new UsageError(`${out} exists and is not a folder`);
      if (fs.readdirSync(out).length > 0 && !values.force)
        throw new UsageError(`${out} is not empty; pass --force to write into it anyway`);
    }
    const { files, trajectories } = await writeDemoRun(out);
    const ids = Object.keys(DEMO_DESCRIPTION);
    const width = Math.max(...ids.map((id) => id.length));
    process.stdout.write(
      `wrote ${trajectories} trajectories and ${files.filter((f) => f.endsWith('.png')).length} images to ${out}\n\n`,
    );
    for (const id of ids) process.stdout.write(`  ${id.padEnd(width)}  ${DEMO_DESCRIPTION[id]}\n`);
    const relative = path.relative(process.cwd(), path.resolve(out)) || '.';
    const shown = relative.startsWith('..') ? path.resolve(out) : relative;
    process.stdout.write(`\nNext: rollscope check ${shown}   or   rollscope serve ${shown}\n`);
    return 0;
  },
};
