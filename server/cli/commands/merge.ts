// `rollscope merge REPORT.json... [--json] [--out FILE]`: fold the outputs of the shards of one
// run into one: check reports (report/merge.ts) into the report an unsharded check gives (and
// its exit status), export manifests (cli/merge.ts) into one manifest of every part.
import fs from 'node:fs';
import path from 'node:path';
import { parse, UsageError, type Command } from '../command.ts';
import { paint } from '../output.ts';
import { printSummary, type TextOut } from '../check.ts';
import { inputKind, mergeExport, type MergeInputKind } from '../merge.ts';
import { checkExitStatus } from '../../report/check-report.ts';
import { mergeCheckReports, MergeError } from '../../report/merge.ts';
import { AtomicFile } from '../../util/atomic-file.ts';

export const command: Command = {
  name: 'merge',
  summary: 'fold the reports (check --shard --json) or export manifests of the shards of one run into one',
  usage: `rollscope merge FILE... [--json] [--out FILE]

Each FILE is the report of one shard (check --shard K/N --json), or the manifest of one shard's
export (FILE.manifest.json, or _part-K.manifest.json of a --partition folder); all N shards, of
one kind. Reports fold into the document a single check --json gives (same trajectories in the
same order, same errors, same summary) with the same exit status; manifests into one manifest
listing every part with its sha256 and rows, and the counts summed (read = exported + rejected),
once the rows have their run-wide keys (the parts holding a row whose key is not the id its data
states are rewritten in place). docs/distributed.md.

Exit status (reports): as check: 0 clean, 1 an error finding or an unreadable record, 2 a path
that could not be read or FILEs that are not the shards of one run. Manifests: 0, or 2.

  --json       print the merged document (default for manifests; reports print as check does)
  --out FILE   write the merged document to FILE (appears only when complete)`,
  async run(argv) {
    const { values, positionals } = parse(argv, {
      json: { type: 'boolean', default: false },
      out: { type: 'string', short: 'o' },
      help: { type: 'boolean', short: 'h', default: false },
    });
    if (positionals.length === 0) throw new UsageError('merge needs at least one FILE');
    const docs: { name: string; doc: unknown; kind: MergeInputKind }[] = [];
    try {
      for (const name of positionals) {
        let doc: unknown;
        try {
          doc = JSON.parse(fs.readFileSync(name, 'utf8'));
        } catch (e) {
          throw new MergeError(`${name}: ${(e as Error).message}`);
        }
        docs.push({ name, doc, kind: inputKind(doc, name) });
      }
      const kinds = new Set(docs.map((d) => d.kind));
      if (kinds.size > 1) {
        const report = docs.find((d) => d.kind === 'check-report')!;
        const manifest = docs.find((d) => d.kind === 'export-manifest')!;
        throw new MergeError(
          `cannot merge check reports with export manifests (${report.name} is a report, ${manifest.name} a manifest)`,
        );
      }
      const write = (text: string) => {
        if (values.out === undefined) return void process.stdout.write(text);
        const file = new AtomicFile(values.out);
        file.write(text);
        file.commit();
      };
      if (docs[0]!.kind === 'export-manifest') {
        const relativeTo = values.out !== undefined ? path.dirname(path.resolve(values.out)) : process.cwd();
        const merged = await mergeExport(docs, relativeTo);
        if (values.json || values.out !== undefined) write(`${JSON.stringify(merged, null, 2)}\n`);
        else
          process.stdout.write(
            `${paint.green('✓')} ${merged.parts.length} part(s): ${merged.counts.exported} row(s) of ${merged.counts.read} read, ${merged.counts.rejected} rejected\n`,
          );
        return 0;
      }
      const report = mergeCheckReports(docs);
      if (values.json || values.out !== undefined) write(`${JSON.stringify(report)}\n`);
      if (!values.json) {
        const out: TextOut = process.stdout;
        for (const t of report.trajectories) {
          const findings = t.findings as { severity: string; kind: string }[];
          const errs = findings.filter((f) => f.severity === 'error').length;
          const mark = findings.length === 0 ? paint.green('✓') : errs > 0 ? paint.red('✗') : paint.yellow('!');
          const kinds = [...new Set(findings.map((f) => f.kind))].join(', ');
          out.write(
            `${mark} ${t.id}  ${paint.dim(`${t.source.file}:${t.source.line} ${t.format}`)}${kinds ? `  ${kinds}` : ''}\n`,
          );
        }
        printSummary(report, out);
      }
      return checkExitStatus(report);
    } catch (e) {
      if (e instanceof MergeError) {
        process.stderr.write(`rollscope merge: ${e.message}\n`);
        return 2;
      }
      throw e;
    }
  },
};
